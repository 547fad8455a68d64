// Radix_sort_pairs_i32/i64/u64/f64 against a stable CPU radix sort by
// the key order CUB's radix sort uses. A stable LSD radix sort is determined by its key order: the
// expected keys and values are exact, and are compared bitwise.
#include "prim_harness.hpp"

#include <kiln/prim/radix_sort.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <type_traits>

using namespace kiln::test;

namespace {

using Value = std::int32_t;

template <typename K>
using Ordered = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>;

// The unsigned key CUB's radix sort orders K by: Traits<K>::TwiddleIn (cub/util_type.cuh; signed: the
// sign bit flipped; floating point: all bits flipped when the sign is set, else the sign bit), with
// twiddled -0.0 read as twiddled +0.0, as every digit extractor does (BaseDigitExtractor::
// ProcessFloatMinusZero, cub/block/radix_rank_sort_operations.cuh).
template <typename K>
Ordered<K> ordered(K key) {
  using U = Ordered<K>;
  constexpr U high = U(1) << (sizeof(U) * 8 - 1);
  U u;
  std::memcpy(&u, &key, sizeof(U));
  if constexpr (std::is_floating_point_v<K>) {
    u = (u & high) ? U(~u) : U(u ^ high);
    return u == U(~high) ? high : u;
  } else if constexpr (std::is_signed_v<K>) {
    return u ^ high;
  } else {
    return u;
  }
}

template <typename K>
struct Pairs {
  std::vector<K> keys;
  std::vector<Value> values;
};

// Stable LSD radix sort of (ordered(key), index), 11 bits a pass; passes in which every key has the same
// digit are skipped.
template <typename K>
Pairs<K> cpu_sort(const Pairs<K>& in) {
  using U = Ordered<K>;
  constexpr int kBits = 11, kDigits = 1 << kBits;
  const std::size_t n = in.keys.size();
  std::vector<U> key(n), key2(n);
  std::vector<std::uint32_t> index(n), index2(n);
  for (std::size_t i = 0; i < n; ++i) key[i] = ordered(in.keys[i]);
  std::iota(index.begin(), index.end(), 0u);
  for (int shift = 0; shift < int(sizeof(U) * 8); shift += kBits) {
    std::vector<std::size_t> count(kDigits + 1, 0);
    for (std::size_t i = 0; i < n; ++i) ++count[((key[i] >> shift) & (kDigits - 1)) + 1];
    if (std::any_of(count.begin(), count.end(), [n](std::size_t c) { return c == n; })) continue;
    for (int d = 0; d < kDigits; ++d) count[d + 1] += count[d];
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t at = count[(key[i] >> shift) & (kDigits - 1)]++;
      key2[at] = key[i];
      index2[at] = index[i];
    }
    key.swap(key2);
    index.swap(index2);
  }
  Pairs<K> out{std::vector<K>(n), std::vector<Value>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    out.keys[i] = in.keys[index[i]];
    out.values[i] = in.values[index[i]];
  }
  return out;
}

// Keys over the whole type (negatives included; for double, random bit patterns: every exponent, a NaN
// or an infinity now and then), values 0..n-1 so that a value shows where its pair came from.
template <typename K>
Pairs<K> random_pairs(std::size_t n, unsigned seed) {
  Pairs<K> p;
  if constexpr (std::is_floating_point_v<K>) {
    const auto bits = random_vector<std::uint64_t>(n, seed, 0, std::numeric_limits<std::uint64_t>::max());
    p.keys.resize(n);
    std::memcpy(p.keys.data(), bits.data(), n * sizeof(K));
  } else {
    p.keys = random_vector<K>(n, seed, std::numeric_limits<K>::lowest(), std::numeric_limits<K>::max());
  }
  p.values.resize(n);
  std::iota(p.values.begin(), p.values.end(), 0);
  return p;
}

// Runs every way of calling the sort on `in` and compares each with the CPU's result. Outputs are
// poisoned before every run; the out-of-place form must leave its inputs as they were.
template <typename K>
void check_all_forms(kiln::prim::RadixSortPairs<K>& plan, const Pairs<K>& in) {
  const std::size_t n = in.keys.size();
  const Pairs<K> want = cpu_sort(in);
  DeviceArray<K> keys_in(in.keys), keys_out(n);
  DeviceArray<Value> values_in(in.values), values_out(n);
  auto check_out = [&](const char* form) {
    INFO("form: ", form);
    KILN_CHECK_SAME(keys_out.download(), want.keys);
    KILN_CHECK_SAME(values_out.download(), want.values);
    KILN_CHECK_SAME(keys_in.download(), in.keys);
    KILN_CHECK_SAME(values_in.download(), in.values);
  };
  auto poison = [&] {
    keys_out.poison();
    values_out.poison();
  };

  poison();
  plan(keys_in.get(), keys_out.get(), values_in.get(), values_out.get(), n);
  check_out("plan, out of place, owned storage");

  DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
  poison();
  plan(keys_in.get(), keys_out.get(), values_in.get(), values_out.get(), n,
       kiln::prim::TempStorage{temp.get(), temp.size()});
  check_out("plan, out of place, caller storage");

  poison();
  kiln::prim::radix_sort_pairs(keys_in.get(), keys_out.get(), values_in.get(), values_out.get(), n);
  synchronize();
  check_out("one-shot, out of place");

  // Double buffer: the input in buffers[0], buffers[1] poisoned; the result where the selector says.
  DeviceArray<std::uint8_t> db_temp(plan.temp_bytes_double_buffer(n));
  auto check_double_buffer = [&](const char* form, bool one_shot) {
    INFO("form: ", form);
    keys_out.poison();
    values_out.poison();
    keys_in.upload(in.keys);
    values_in.upload(in.values);
    kiln::prim::DoubleBuffer<K> keys(keys_in.get(), keys_out.get());
    kiln::prim::DoubleBuffer<Value> values(values_in.get(), values_out.get());
    if (one_shot) {
      kiln::prim::radix_sort_pairs(keys, values, n);
      synchronize();
    } else {
      plan(keys, values, n, kiln::prim::TempStorage{db_temp.get(), db_temp.size()});
    }
    CHECK(keys.selector == values.selector);
    KILN_CHECK_SAME((keys.selector ? keys_out : keys_in).download(), want.keys);
    KILN_CHECK_SAME((values.selector ? values_out : values_in).download(), want.values);
  };
  check_double_buffer("plan, double buffer, caller storage", false);
  check_double_buffer("one-shot, double buffer", true);
}

// The single-tile kernel's edges (sizes_around), the onesweep tile's, an odd million and 2^26.
template <typename K>
std::vector<std::size_t> sizes_for(const kiln::prim::RadixSortPairs<K>& plan) {
  std::vector<std::size_t> sizes = sizes_around(plan.single_tile_items());
  const std::size_t tile = plan.tile_items();
  sizes.insert(sizes.end(), {tile - 1, tile, tile + 1, 2 * tile + 1});
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

template <typename K>
void check_random() {
  PrimContext context;
  kiln::prim::RadixSortPairs<K> plan;
  check_source(plan.kernel());
  REQUIRE(plan.single_tile_items() > 1);
  REQUIRE(plan.tile_items() > plan.single_tile_items());
  unsigned seed = 1;
  for (std::size_t n : sizes_for(plan)) {
    CAPTURE(n);
    check_all_forms(plan, random_pairs<K>(n, seed++));
  }
}

// Few distinct keys: long runs of equal keys, whose values must keep their input order.
template <typename K>
void check_few_keys() {
  PrimContext context;
  kiln::prim::RadixSortPairs<K> plan;
  for (std::size_t n : {plan.single_tile_items(), std::size_t{1000003}}) {
    CAPTURE(n);
    Pairs<K> p = random_pairs<K>(n, 7);
    const auto small = random_vector<int>(n, 8, -3, 3);
    for (std::size_t i = 0; i < n; ++i) p.keys[i] = std::is_signed_v<K> ? K(small[i]) : K(small[i] + 3);
    check_all_forms(plan, p);
  }
}

// All keys equal: the output is the input, pair for pair. For double, -0.0 and +0.0 mixed: equal keys
// to the sort, each keeping its own bits.
template <typename K>
void check_all_equal() {
  PrimContext context;
  kiln::prim::RadixSortPairs<K> plan;
  for (std::size_t n : {plan.single_tile_items(), plan.tile_items() + 1, std::size_t{1000003}}) {
    CAPTURE(n);
    Pairs<K> p = random_pairs<K>(n, 9);
    const auto coin = random_vector<int>(n, 10, 0, 1);
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_floating_point_v<K>) p.keys[i] = coin[i] ? -0.0 : 0.0;
      else p.keys[i] = std::is_signed_v<K> ? K(-7) : K(7);
    }
    REQUIRE(cpu_sort(p).values == p.values);
    check_all_forms(plan, p);
  }
}

template <typename K>
void check_family() {
  SUBCASE("random keys at every size") { check_random<K>(); }
  SUBCASE("few distinct keys: stable") { check_few_keys<K>(); }
  SUBCASE("all keys equal: stable") { check_all_equal<K>(); }
}

double from_bits(std::uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

}  // namespace

TEST_CASE("radix_sort_pairs_i32 matches a stable CPU sort") { check_family<std::int32_t>(); }
TEST_CASE("radix_sort_pairs_i64 matches a stable CPU sort") { check_family<std::int64_t>(); }
TEST_CASE("radix_sort_pairs_u64 matches a stable CPU sort") { check_family<std::uint64_t>(); }
TEST_CASE("radix_sort_pairs_f64 matches a stable CPU sort") { check_family<double>(); }

TEST_CASE("radix_sort_pairs_f64: -0.0, +0.0, infinities and NaNs sort in CUB's order") {
  PrimContext context;
  kiln::prim::RadixSortPairs<double> plan;
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = from_bits(0x7ff8000000000000ull), minus_nan = from_bits(0xfff8000000000000ull);

  SUBCASE("the order, spelled out") {
    // NaNs with the sign bit set first, then -inf, numbers, -0.0 and +0.0 as one key in input order,
    // +inf, and NaNs with the sign bit clear last.
    const Pairs<double> in{{nan, 1.0, -0.0, -inf, 0.0, minus_nan, inf, -1.0, -0.0}, {0, 1, 2, 3, 4, 5, 6, 7, 8}};
    const std::vector<Value> order = {5, 3, 7, 2, 4, 8, 1, 6, 0};
    REQUIRE(cpu_sort(in).values == order);
    check_all_forms(plan, in);
  }

  SUBCASE("special values among numbers, one tile and many") {
    const std::vector<double> specials = {
        -0.0, 0.0, inf, -inf, nan, minus_nan,
        from_bits(0x7ff0000000000001ull), from_bits(0xfff0000000000001ull),  // signalling NaNs
        from_bits(0x7fffffffffffffffull), from_bits(0xffffffffffffffffull),  // largest payloads
        std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::denorm_min(),
        std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
        std::numeric_limits<double>::min(), -std::numeric_limits<double>::min(), 1.0, -1.0};
    for (std::size_t n : {std::size_t{1000}, plan.single_tile_items(), std::size_t{1000003}}) {
      CAPTURE(n);
      Pairs<double> p = random_pairs<double>(n, 11);
      const auto numbers = random_vector<double>(n, 12, -10.0, 10.0);
      const auto pick = random_vector<int>(n, 13, 0, int(2 * specials.size()) - 1);
      for (std::size_t i = 0; i < n; ++i) {
        p.keys[i] = pick[i] < int(specials.size()) ? specials[std::size_t(pick[i])] : numbers[i];
      }
      check_all_forms(plan, p);
    }
  }
}

TEST_CASE("radix_sort_pairs_i32: more than one onesweep portion") {
  // Inputs longer than a portion (just under 2^28 items) take several onesweep launches per pass, each
  // passing its digit counts to the next portion's.
  PrimContext context;
  kiln::prim::RadixSortPairs<std::int32_t> plan;
  const std::size_t n = plan.portion_items() + plan.tile_items() + 3;
  CAPTURE(n);
  check_all_forms(plan, random_pairs<std::int32_t>(n, 21));
}

TEST_CASE("radix_sort_pairs: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::RadixSortPairs<std::int64_t> plan;
  const std::size_t n = 1 << 20;
  DeviceArray<std::int64_t> keys(n), keys_out(n);
  DeviceArray<std::int32_t> values(n), values_out(n);
  REQUIRE(plan.temp_bytes(n) > plan.temp_bytes_double_buffer(n));
  REQUIRE(plan.temp_bytes_double_buffer(n) > 1);
  const kiln::prim::TempStorage small{keys_out.get(), plan.temp_bytes_double_buffer(n)};
  CHECK_THROWS_AS(plan(keys.get(), keys_out.get(), values.get(), values_out.get(), n, small), kiln::Error);
  kiln::prim::DoubleBuffer<std::int64_t> kb(keys.get(), keys_out.get());
  kiln::prim::DoubleBuffer<std::int32_t> vb(values.get(), values_out.get());
  CHECK_THROWS_AS(plan(kb, vb, n, kiln::prim::TempStorage{keys_out.get(), 1}), kiln::Error);
  CHECK_THROWS_AS(plan.temp_bytes(std::size_t{1} << 33), kiln::Error);
}
