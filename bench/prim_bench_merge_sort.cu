// Merge sort of u64 keys with i32 values, kiln's plan against
// cub::DeviceMergeSort::SortPairs with the same comparator. Rate: G items/s (pairs sorted per second).
#include "prim_bench.hpp"

#include <kiln/prim/merge_sort.hpp>

#include <cub/device/device_merge_sort.cuh>

#include <cuda/std/functional>

#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

Row merge_sort_row(std::size_t n) {
  using K = std::uint64_t;
  using V = std::int32_t;
  // The unsorted input, kept; each timed run sorts a fresh copy of it in place.
  auto keys0 = std::make_shared<DeviceVector<K>>(n);
  auto values0 = std::make_shared<DeviceVector<V>>(n);
  auto keys = std::make_shared<DeviceVector<K>>(n);
  auto values = std::make_shared<DeviceVector<V>>(n);
  fill_random(*keys0, K(0), ~K(0));
  std::vector<V> positions(n);
  std::iota(positions.begin(), positions.end(), V(0));
  values0->upload(positions);
  auto plan = std::make_shared<kiln::prim::MergeSortPairs<K>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceMergeSort::SortPairs(nullptr, cub_bytes, keys->data(), values->data(), int(n),
                                             ::cuda::std::less<>{}));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "merge_sort";
  row.type = "u64+i32";
  row.n = n;
  row.bytes = 0;
  row.kiln = [=](CUstream s) {
    (*plan)(keys->data(), values->data(), n, kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceMergeSort::SortPairs(cub_temp->data(), bytes, keys->data(), values->data(), int(n),
                                               ::cuda::std::less<>{}, s));
  };
  row.reset = [=](CUstream s) {
    keys->copy_from(*keys0, s);
    values->copy_from(*values0, s);
  };
  row.release = [keys0, values0, keys, values, kiln_temp, cub_temp, plan]() mutable {
    keys0.reset(), values0.reset(), keys.reset(), values.reset(), kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> merge_sort_rows(std::size_t n) { return {merge_sort_row(n)}; }

}  // namespace kiln::bench
