// Unique_by_key_i32/u64 against a CPU unique by key.
#include "prim_harness.hpp"

#include <kiln/prim/unique_by_key.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>

using namespace kiln::test;

namespace {

using Value = std::int32_t;

// The key patterns each size runs with (values are random, so keeping any value but the first of a run
// shows).
enum class KeyPattern { sorted_half_duplicates, unsorted_runs, all_equal, many_duplicates, sorted, reverse_sorted };

const char* name(KeyPattern k) {
  switch (k) {
    case KeyPattern::sorted_half_duplicates: return "sorted, about half duplicates";
    case KeyPattern::unsorted_runs: return "unsorted, short runs";
    case KeyPattern::all_equal: return "all equal";
    case KeyPattern::many_duplicates: return "sorted, many duplicates";
    case KeyPattern::sorted: return "already sorted, distinct";
    case KeyPattern::reverse_sorted: return "reverse sorted, distinct";
  }
  return "?";
}

// A key from a small integer: u64 keys differ only above bit 32 (a comparison of the low words would see
// one key), i32 keys are spread over negatives and positives.
template <typename K>
K key_of(std::int64_t r) {
  if constexpr (std::is_same_v<K, std::uint64_t>) return (static_cast<std::uint64_t>(r) << 32) | 0x9u;
  else return static_cast<K>(r - (std::int64_t{1} << 30));
}

template <typename K>
std::vector<K> make_keys(KeyPattern pattern, std::size_t n, unsigned seed) {
  std::vector<std::int64_t> r;
  const auto m = static_cast<std::int64_t>(n);
  switch (pattern) {
    case KeyPattern::sorted_half_duplicates:
      // Each key repeats the previous one with probability 1/2 (linear time: no host sort at 2^26).
      r = random_vector<std::int64_t>(n, seed, 0, 1);
      std::partial_sum(r.begin(), r.end(), r.begin());
      break;
    case KeyPattern::unsorted_runs: r = random_vector<std::int64_t>(n, seed, 0, 3); break;
    case KeyPattern::all_equal: r.assign(n, 7); break;
    case KeyPattern::many_duplicates: {
      // 17 keys in runs of random lengths, sorted by counting.
      std::vector<std::size_t> count(17);
      for (std::int64_t x : random_vector<std::int64_t>(n, seed, 0, 16)) ++count[std::size_t(x)];
      for (std::size_t k = 0; k < count.size(); ++k) r.insert(r.end(), count[k], std::int64_t(k));
      break;
    }
    case KeyPattern::sorted:
      r.resize(n);
      for (std::size_t i = 0; i < n; ++i) r[i] = std::int64_t(i);
      break;
    case KeyPattern::reverse_sorted:
      r.resize(n);
      for (std::size_t i = 0; i < n; ++i) r[i] = m - std::int64_t(i);
      break;
  }
  std::vector<K> keys(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = key_of<K>(r[i]);
  return keys;
}

// The first key of each run of equal keys, and the value that came with it.
template <typename K>
void cpu_unique_by_key(const std::vector<K>& keys, const std::vector<Value>& values, std::vector<K>& keys_out,
                       std::vector<Value>& values_out) {
  keys_out.clear(), values_out.clear();
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i == 0 || keys[i] != keys[i - 1]) keys_out.push_back(keys[i]), values_out.push_back(values[i]);
  }
}

// The run's outputs: the first `selected` items of each output, and the count the GPU wrote.
template <typename K>
struct Result {
  std::vector<K> keys;
  std::vector<Value> values;
  std::uint64_t selected;
};

template <typename K>
Result<K> read(const DeviceArray<K>& keys, const DeviceArray<Value>& values, const DeviceArray<std::uint64_t>& count) {
  Result<K> r{keys.download(), values.download(), count.download()[0]};
  if (r.selected <= r.keys.size()) r.keys.resize(r.selected), r.values.resize(r.selected);
  return r;
}

template <typename K>
void check_unique_by_key() {
  PrimContext context;
  kiln::prim::UniqueByKey<K> plan;
  check_source(plan.kernel());
  REQUIRE(plan.tile_items() > 1);
  unsigned seed = 1;
  for (KeyPattern pattern : {KeyPattern::sorted_half_duplicates, KeyPattern::unsorted_runs, KeyPattern::all_equal, KeyPattern::many_duplicates,
                       KeyPattern::sorted, KeyPattern::reverse_sorted}) {
    for (std::size_t n : sizes_around(plan.tile_items())) {
      CAPTURE(name(pattern));
      CAPTURE(n);
      const auto keys = make_keys<K>(pattern, n, seed++);
      const auto values = random_vector<Value>(n, seed++, std::numeric_limits<Value>::min(),
                                               std::numeric_limits<Value>::max());
      std::vector<K> want_keys;
      std::vector<Value> want_values;
      cpu_unique_by_key(keys, values, want_keys, want_values);

      DeviceArray<K> d_keys(keys), d_keys_out(n);
      DeviceArray<Value> d_values(values), d_values_out(n);
      DeviceArray<std::uint64_t> d_count(1);
      auto run_and_check = [&](auto&& run) {
        d_keys_out.poison(), d_values_out.poison(), d_count.poison();
        run();
        const Result<K> got = read(d_keys_out, d_values_out, d_count);
        CHECK(got.selected == want_keys.size());
        KILN_CHECK_SAME(got.keys, want_keys);
        KILN_CHECK_SAME(got.values, want_values);
      };

      run_and_check([&] { plan(d_keys.get(), d_values.get(), d_keys_out.get(), d_values_out.get(), d_count.get(), n); });
      // Caller-supplied storage (poisoned: the tile states must be initialised by the plan), and the one-shot.
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      temp.poison();
      run_and_check([&] {
        plan(d_keys.get(), d_values.get(), d_keys_out.get(), d_values_out.get(), d_count.get(), n,
             kiln::prim::TempStorage{temp.get(), temp.size()});
      });
      run_and_check([&] {
        kiln::prim::unique_by_key(d_keys.get(), d_values.get(), d_keys_out.get(), d_values_out.get(), d_count.get(), n);
        synchronize();
      });
    }
  }
}

}  // namespace

TEST_CASE("unique_by_key_i32 matches the CPU") { check_unique_by_key<std::int32_t>(); }
TEST_CASE("unique_by_key_u64 matches the CPU") { check_unique_by_key<std::uint64_t>(); }

TEST_CASE("unique_by_key: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::UniqueByKey<std::int32_t> plan;
  DeviceArray<std::int32_t> d(1 << 20);
  DeviceArray<std::uint64_t> count(1);
  REQUIRE(plan.temp_bytes(1 << 20) > 1);
  CHECK_THROWS_AS(plan(d.get(), d.get(), d.get(), d.get(), count.get(), 1 << 20, kiln::prim::TempStorage{d.get(), 1}),
                  kiln::Error);
}
