// The largest of each block's 256 values (CUB's BlockReduce).
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>  // cuda::maximum (CCCL 3 dropped cub::Max)

extern "C" __global__ void __launch_bounds__(256) block_max(const int* in, int* out, int n) {
  using Reduce = cub::BlockReduce<int, 256>;
  __shared__ typename Reduce::TempStorage storage;
  const int i = blockIdx.x * 256 + threadIdx.x;
  const int best = Reduce(storage).Reduce(i < n ? in[i] : -2147483647 - 1, cuda::maximum<>{});
  if (threadIdx.x == 0) out[blockIdx.x] = best;
}
