// out[i] = 3 * i.
#include "tiny/step.cuh"  // include/tiny/step.cuh

extern "C" __global__ void iota(int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = tiny::step * i;
}
