// The bounding box of n points, one box per block (the host merges them): CUB's BlockReduce over the
// project's own header, which lies in include/ inside this folder. Both ways kiln's JIT once failed on:
#include <cub/block/block_reduce.cuh>
#include "geo/box.cuh"                     // quoted, found through include_dirs = ["include"]
#define GEO_LIMITS_HEADER <geo/limits.cuh>
#include GEO_LIMITS_HEADER                 // computed: NVRTC is asked for geo/limits.cuh

namespace geo {

template <typename T>
__global__ void __launch_bounds__(256) bounds(const T* x, const T* y, int n, T* boxes) {
  using Reduce = cub::BlockReduce<Box<T>, 256>;
  __shared__ typename Reduce::TempStorage storage;
  Box<T> mine{Largest<T>::value, Largest<T>::value, -Largest<T>::value, -Largest<T>::value};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    mine = MergeBoxes{}(mine, Box<T>{x[i], y[i], x[i], y[i]});
  const Box<T> box = Reduce(storage).Reduce(mine, MergeBoxes{});
  if (threadIdx.x == 0) {
    boxes[4 * blockIdx.x + 0] = box.x0;
    boxes[4 * blockIdx.x + 1] = box.y0;
    boxes[4 * blockIdx.x + 2] = box.x1;
    boxes[4 * blockIdx.x + 3] = box.y1;
  }
}

}  // namespace geo
