// A CUB-heavy block kernel for the JIT benchmarks: load, radix-sort, scan and store one tile per block.
#pragma once

#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>

namespace kiln_bench {

template <typename T, int BlockThreads, int ItemsPerThread>
__global__ void __launch_bounds__(BlockThreads) sort_scan_tiles(const T* in, T* out) {
  using Load = cub::BlockLoad<T, BlockThreads, ItemsPerThread, cub::BLOCK_LOAD_TRANSPOSE>;
  using Sort = cub::BlockRadixSort<T, BlockThreads, ItemsPerThread>;
  using Scan = cub::BlockScan<T, BlockThreads>;
  using Store = cub::BlockStore<T, BlockThreads, ItemsPerThread, cub::BLOCK_STORE_TRANSPOSE>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Sort::TempStorage sort;
    typename Scan::TempStorage scan;
    typename Store::TempStorage store;
  } storage;
  constexpr int tile = BlockThreads * ItemsPerThread;
  T items[ItemsPerThread];
  Load(storage.load).Load(in + blockIdx.x * tile, items);
  __syncthreads();
  Sort(storage.sort).Sort(items);
  __syncthreads();
  Scan(storage.scan).InclusiveSum(items, items);
  __syncthreads();
  Store(storage.store).Store(out + blockIdx.x * tile, items);
}

}  // namespace kiln_bench
