// Merge_sort_pairs_u64 against a stable CPU sort.
#include "prim_harness.hpp"

#include <kiln/prim/merge_sort.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <utility>

using namespace kiln::test;

namespace {

using Key = std::uint64_t;
using Value = std::int32_t;

// The key patterns each size runs with. Values are the input positions, so a stable sort has exactly one
// correct result and any reordering of equal keys shows.
enum class Keys { random, all_equal, many_duplicates, sorted, reverse_sorted };

const char* name(Keys k) {
  switch (k) {
    case Keys::random: return "random";
    case Keys::all_equal: return "all equal";
    case Keys::many_duplicates: return "many duplicates";
    case Keys::sorted: return "already sorted";
    case Keys::reverse_sorted: return "reverse sorted";
  }
  return "?";
}

std::vector<Key> make_keys(Keys pattern, std::size_t n, unsigned seed) {
  switch (pattern) {
    case Keys::random: return random_vector<Key>(n, seed, 0, ~Key{0});
    case Keys::all_equal: return std::vector<Key>(n, Key{0xDEADBEEF12345678ull});
    case Keys::many_duplicates: {
      // 17 distinct keys that differ only above bit 32, so a comparison of the low words would see one key.
      auto keys = random_vector<Key>(n, seed, 0, 16);
      for (auto& k : keys) k = (k << 40) | 0x77;
      return keys;
    }
    case Keys::sorted:
    case Keys::reverse_sorted: {
      // Ascending random steps over the whole key range, built in linear time (no host sort at 2^26).
      auto keys = random_vector<Key>(n, seed, 1, n ? ~Key{0} / n : 1);
      std::partial_sum(keys.begin(), keys.end(), keys.begin());
      if (pattern == Keys::reverse_sorted) std::reverse(keys.begin(), keys.end());
      return keys;
    }
  }
  return {};
}

std::vector<Value> positions(std::size_t n) {
  std::vector<Value> values(n);
  std::iota(values.begin(), values.end(), Value{0});
  return values;
}

// Stable sort by key: with values equal to positions, sorting (key, position) pairs is the same thing.
// Input already in order (sorted, all equal) or strictly descending is answered in linear time.
std::pair<std::vector<Key>, std::vector<Value>> cpu_stable_sort(const std::vector<Key>& keys) {
  if (std::is_sorted(keys.begin(), keys.end())) return {keys, positions(keys.size())};
  if (std::adjacent_find(keys.begin(), keys.end(), std::less_equal<>()) == keys.end()) {
    std::pair<std::vector<Key>, std::vector<Value>> out{{keys.rbegin(), keys.rend()}, positions(keys.size())};
    std::reverse(out.second.begin(), out.second.end());
    return out;
  }
  std::vector<std::pair<Key, Value>> pairs(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) pairs[i] = {keys[i], Value(i)};
  std::sort(pairs.begin(), pairs.end());
  std::pair<std::vector<Key>, std::vector<Value>> out;
  out.first.resize(keys.size());
  out.second.resize(keys.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) out.first[i] = pairs[i].first, out.second[i] = pairs[i].second;
  return out;
}

}  // namespace

TEST_CASE("merge_sort_pairs_u64 matches a stable CPU sort") {
  PrimContext context;
  kiln::prim::MergeSortPairs<Key> plan;
  check_source(plan.kernel());
  REQUIRE(plan.tile_items() > 1);
  unsigned seed = 1;
  for (Keys pattern : {Keys::random, Keys::all_equal, Keys::many_duplicates, Keys::sorted, Keys::reverse_sorted}) {
    for (std::size_t n : sizes_around(plan.tile_items())) {
      CAPTURE(name(pattern));
      CAPTURE(n);
      const auto keys = make_keys(pattern, n, seed++);
      const auto values = positions(n);
      const auto want = cpu_stable_sort(keys);
      DeviceArray<Key> d_keys(n);
      DeviceArray<Value> d_values(n);

      // In place: the inputs are the outputs, so each run starts from a fresh upload.
      d_keys.upload(keys), d_values.upload(values);
      plan(d_keys.get(), d_values.get(), n);
      KILN_CHECK_SAME(d_keys.download(), want.first);
      KILN_CHECK_SAME(d_values.download(), want.second);

      // Caller-supplied storage, poisoned so that nothing may rely on it being zero.
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      temp.poison();
      d_keys.upload(keys), d_values.upload(values);
      plan(d_keys.get(), d_values.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
      KILN_CHECK_SAME(d_keys.download(), want.first);
      KILN_CHECK_SAME(d_values.download(), want.second);

      d_keys.upload(keys), d_values.upload(values);
      kiln::prim::merge_sort_pairs(d_keys.get(), d_values.get(), n);
      synchronize();
      KILN_CHECK_SAME(d_keys.download(), want.first);
      KILN_CHECK_SAME(d_values.download(), want.second);
    }
  }
}

TEST_CASE("merge_sort_pairs: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::MergeSortPairs<Key> plan;
  DeviceArray<Key> keys(1 << 20);
  DeviceArray<Value> values(1 << 20);
  REQUIRE(plan.temp_bytes(1 << 20) > 1);
  CHECK(plan.temp_bytes(0) == 0);
  CHECK_THROWS_AS(plan(keys.get(), values.get(), 1 << 20, kiln::prim::TempStorage{keys.get(), 1}),
                  kiln::Error);
}
