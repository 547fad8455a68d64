// y[i] = alpha * x[i], as a template: each instantiation is one kernel of the registry.
namespace kiln_examples {

template <typename T>
__global__ void scale(const T* x, T* y, T alpha, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = alpha * x[i];
}

}  // namespace kiln_examples
