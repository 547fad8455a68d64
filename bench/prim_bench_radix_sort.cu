// Radix sort of key/int pairs over all key bits, kiln's plan against
// cub::DeviceRadixSort::SortPairs in both of CUB's forms: out of place (type "i32") and double buffer
// (type "i32 db"). Rates in G items/s.
#include "prim_bench.hpp"

#include <kiln/prim/radix_sort.hpp>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "prim_bench_util.cuh"

namespace kiln::bench {
namespace {

using V = std::int32_t;

// What every row of one size shares: all rows are built before the first is measured, so at 2^28 items
// per-row outputs and temporary storage would not fit an H100 together. Each key type keeps its own
// input keys; the values, outputs, second buffers and temporary storage are shared.
struct Pool {
  Pool(std::size_t n, std::size_t kiln_bytes, std::size_t cub_bytes)
      : keys_out(n), keys_alt(n), values_in(n), values_out(n), values_alt(n), kiln_temp(kiln_bytes),
        cub_temp(cub_bytes) {
    fill_random(values_in, V(0), std::numeric_limits<V>::max());
  }
  DeviceVector<std::uint64_t> keys_out, keys_alt;  // 8-byte words: room for every key type
  DeviceVector<V> values_in, values_out, values_alt;
  DeviceVector<std::uint8_t> kiln_temp, cub_temp;
};

template <typename K>
struct Keys {
  explicit Keys(std::size_t n) : in(n) {
    if constexpr (std::is_floating_point_v<K>) {
      fill_random(in, K(-1e9), K(1e9));
    } else {
      fill_random(in, std::numeric_limits<K>::lowest(), std::numeric_limits<K>::max());
    }
  }
  DeviceVector<K> in;
  kiln::prim::RadixSortPairs<K> plan;
};

template <typename K>
constexpr int end_bit = int(sizeof(K) * 8);

template <typename K>
std::size_t cub_temp_bytes(std::size_t n, bool double_buffer) {
  std::size_t bytes = 0;
  if (double_buffer) {
    cub::DoubleBuffer<K> keys;
    cub::DoubleBuffer<V> values;
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, values, int(n), 0, end_bit<K>));
  } else {
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const K*>(nullptr), static_cast<K*>(nullptr),
                                               static_cast<const V*>(nullptr), static_cast<V*>(nullptr), int(n), 0,
                                               end_bit<K>));
  }
  return bytes;
}

// Closures hold raw pointers; `release` holds the owners, so releasing a row frees what only it used.
template <typename K>
Row sort_row(std::size_t n, bool double_buffer, std::shared_ptr<Keys<K>> keys, std::shared_ptr<Pool> pool) {
  Row row;
  row.family = "radix_sort_pairs";
  row.type = std::string(kiln::prim::detail::type_suffix<K>()) + (double_buffer ? " db" : "");
  row.n = n;
  row.bytes = 0;  // G items/s
  const Keys<K>* k = keys.get();
  Pool* p = pool.get();
  K* keys_out = reinterpret_cast<K*>(p->keys_out.data());
  K* keys_alt = reinterpret_cast<K*>(p->keys_alt.data());
  if (!double_buffer) {
    // Out of place: the inputs are never written; nothing to restore between runs.
    row.kiln = [=](CUstream s) {
      k->plan(k->in.data(), keys_out, p->values_in.data(), p->values_out.data(), n,
              kiln::prim::TempStorage{p->kiln_temp.data(), p->kiln_temp.size()}, s);
    };
    row.cub = [=](CUstream s) {
      std::size_t bytes = p->cub_temp.size();
      check_cuda(cub::DeviceRadixSort::SortPairs(p->cub_temp.data(), bytes, k->in.data(), keys_out,
                                                 p->values_in.data(), p->values_out.data(), int(n), 0, end_bit<K>, s));
    };
  } else {
    // Double buffer: both buffers are overwritten, so `reset` copies the inputs into buffers[0] and
    // points the selectors at them before every run, for either side.
    struct Buffers {
      kiln::prim::DoubleBuffer<K> kiln_keys;
      kiln::prim::DoubleBuffer<V> kiln_values;
      cub::DoubleBuffer<K> cub_keys;
      cub::DoubleBuffer<V> cub_values;
    };
    auto b = std::make_shared<Buffers>(Buffers{{keys_alt, keys_out},
                                               {p->values_alt.data(), p->values_out.data()},
                                               {keys_alt, keys_out},
                                               {p->values_alt.data(), p->values_out.data()}});
    row.reset = [=](CUstream s) {
      check_cuda(cudaMemcpyAsync(keys_alt, k->in.data(), n * sizeof(K), cudaMemcpyDeviceToDevice, s));
      check_cuda(cudaMemcpyAsync(p->values_alt.data(), p->values_in.data(), n * sizeof(V), cudaMemcpyDeviceToDevice, s));
      b->kiln_keys.selector = b->kiln_values.selector = 0;
      b->cub_keys.selector = b->cub_values.selector = 0;
    };
    row.kiln = [=](CUstream s) {
      k->plan(b->kiln_keys, b->kiln_values, n, kiln::prim::TempStorage{p->kiln_temp.data(), p->kiln_temp.size()}, s);
    };
    row.cub = [=](CUstream s) {
      std::size_t bytes = p->cub_temp.size();
      check_cuda(cub::DeviceRadixSort::SortPairs(p->cub_temp.data(), bytes, b->cub_keys, b->cub_values, int(n), 0,
                                                 end_bit<K>, s));
    };
  }
  row.release = [keys, pool]() mutable {
    keys.reset();
    pool.reset();
  };
  return row;
}

}  // namespace

std::vector<Row> radix_sort_rows(std::size_t n) {
  auto i32 = std::make_shared<Keys<std::int32_t>>(n);
  auto i64 = std::make_shared<Keys<std::int64_t>>(n);
  auto u64 = std::make_shared<Keys<std::uint64_t>>(n);
  auto f64 = std::make_shared<Keys<double>>(n);
  std::size_t kiln_bytes = 0, cub_bytes = 0;
  auto need = [&](const auto& keys, auto key) {
    using K = decltype(key);
    kiln_bytes = std::max({kiln_bytes, keys->plan.temp_bytes(n), keys->plan.temp_bytes_double_buffer(n)});
    cub_bytes = std::max({cub_bytes, cub_temp_bytes<K>(n, false), cub_temp_bytes<K>(n, true)});
  };
  need(i32, std::int32_t{});
  need(i64, std::int64_t{});
  need(u64, std::uint64_t{});
  need(f64, double{});
  auto pool = std::make_shared<Pool>(n, kiln_bytes, cub_bytes);
  std::vector<Row> rows;
  for (bool db : {false, true}) {
    rows.push_back(sort_row<std::int32_t>(n, db, i32, pool));
    rows.push_back(sort_row<std::int64_t>(n, db, i64, pool));
    rows.push_back(sort_row<std::uint64_t>(n, db, u64, pool));
    rows.push_back(sort_row<double>(n, db, f64, pool));
  }
  return rows;
}

}  // namespace kiln::bench
