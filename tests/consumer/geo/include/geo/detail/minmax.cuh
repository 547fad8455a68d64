// Min and max without <algorithm> (NVRTC has no host standard library).
#pragma once

namespace geo::detail {

template <typename T>
__device__ T lower(T a, T b) { return b < a ? b : a; }
template <typename T>
__device__ T higher(T a, T b) { return a < b ? b : a; }

}  // namespace geo::detail
