// An axis-aligned box, reduced with CUB: the operator BlockReduce combines boxes with.
#pragma once

#include "detail/minmax.cuh"  // beside this header: the bundle names it geo/detail/minmax.cuh for NVRTC

namespace geo {

template <typename T>
struct Box {
  T x0, y0, x1, y1;
};

struct MergeBoxes {
  template <typename T>
  __device__ Box<T> operator()(const Box<T>& a, const Box<T>& b) const {
    return {detail::lower(a.x0, b.x0), detail::lower(a.y0, b.y0), detail::higher(a.x1, b.x1), detail::higher(a.y1, b.y1)};
  }
};

}  // namespace geo
