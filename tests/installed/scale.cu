// data[i] *= factor, for any arithmetic T: a template the table instantiates by name expression.
namespace tiny {
template <typename T>
__global__ void scale(T* data, T factor, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] *= factor;
}
}  // namespace tiny
