// Unique by key on sorted keys with about 50% duplicates, i32 values,
// kiln's plan against cub::DeviceSelect::UniqueByKey. Rate: G items/s (input pairs per second).
#include "prim_bench.hpp"

#include <kiln/prim/unique_by_key.hpp>

#include <cub/device/device_select.cuh>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

// Sorted keys where each key repeats the previous one with probability 1/2: runs of random length, about
// half the items duplicates. Linear, so 2^28 items take no host sort.
template <typename K>
std::vector<K> sorted_half_duplicates(std::size_t n, unsigned seed = 42) {
  std::mt19937_64 rng(seed);
  std::vector<K> keys(n);
  K k = K(0);
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 64 == 0) bits = rng();
    if (i > 0 && ((bits >> (i % 64)) & 1)) ++k;
    keys[i] = k;
  }
  return keys;
}

template <typename K>
Row unique_row(std::size_t n) {
  using V = std::int32_t;
  auto keys_in = std::make_shared<DeviceVector<K>>(n);
  auto values_in = std::make_shared<DeviceVector<V>>(n);
  auto keys_out = std::make_shared<DeviceVector<K>>(n);
  auto values_out = std::make_shared<DeviceVector<V>>(n);
  auto count = std::make_shared<DeviceVector<std::uint64_t>>(1);
  keys_in->upload(sorted_half_duplicates<K>(n));
  fill_random(*values_in, V(-1000000), V(1000000));
  auto plan = std::make_shared<kiln::prim::UniqueByKey<K>>();
  auto kiln_temp = std::make_shared<DeviceVector<std::uint8_t>>(plan->temp_bytes(n));
  std::size_t cub_bytes = 0;
  check_cuda(cub::DeviceSelect::UniqueByKey(nullptr, cub_bytes, keys_in->data(), values_in->data(), keys_out->data(),
                                            values_out->data(), count->data(), int(n)));
  auto cub_temp = std::make_shared<DeviceVector<std::uint8_t>>(cub_bytes);

  Row row;
  row.family = "unique_by_key";
  row.type = kiln::prim::detail::type_suffix<K>();
  row.n = n;
  row.bytes = 0;
  row.kiln = [=](CUstream s) {
    (*plan)(keys_in->data(), values_in->data(), keys_out->data(), values_out->data(), count->data(), n,
            kiln::prim::TempStorage{kiln_temp->data(), kiln_temp->size()}, s);
  };
  row.cub = [=](CUstream s) {
    std::size_t bytes = cub_temp->size();
    check_cuda(cub::DeviceSelect::UniqueByKey(cub_temp->data(), bytes, keys_in->data(), values_in->data(),
                                              keys_out->data(), values_out->data(), count->data(), int(n), s));
  };
  row.release = [keys_in, values_in, keys_out, values_out, count, kiln_temp, cub_temp, plan]() mutable {
    keys_in.reset(), values_in.reset(), keys_out.reset(), values_out.reset(), count.reset();
    kiln_temp.reset(), cub_temp.reset(), plan.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> unique_by_key_rows(std::size_t n) {
  return {unique_row<std::int32_t>(n), unique_row<std::uint64_t>(n)};
}

}  // namespace kiln::bench
