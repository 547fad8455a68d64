// The largest finite value of the coordinate types: an empty box's corners.
#pragma once

namespace geo {

template <typename T>
struct Largest;
template <>
struct Largest<float> {
  static constexpr float value = 3.402823466e+38f;
};
template <>
struct Largest<double> {
  static constexpr double value = 1.7976931348623157e+308;
};

}  // namespace geo
