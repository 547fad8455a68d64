// One partial sum per block, with CUB's block-level reduction.
#pragma once

#include <cub/block/block_reduce.cuh>

namespace kiln_examples {

template <typename T, int BlockThreads>
__global__ void __launch_bounds__(BlockThreads) block_sum(const T* in, T* partial, int n) {
  using BlockReduce = cub::BlockReduce<T, BlockThreads>;
  __shared__ typename BlockReduce::TempStorage storage;
  T sum = T(0);
  for (int i = blockIdx.x * BlockThreads + threadIdx.x; i < n; i += gridDim.x * BlockThreads) sum += in[i];
  T block = BlockReduce(storage).Sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = block;
}

}  // namespace kiln_examples
