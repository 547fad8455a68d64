// out[i] = 3 * i.
extern "C" __global__ void iota(int* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 3 * i;
}
