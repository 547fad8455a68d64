// Moves n points by (dx, dy), in place.
#pragma once

namespace geo {

template <typename T>
__global__ void translate(T* x, T* y, T dx, T dy, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    x[i] += dx;
    y[i] += dy;
  }
}

}  // namespace geo
