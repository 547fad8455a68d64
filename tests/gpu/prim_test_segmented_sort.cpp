// Segmented_sort_i32/f64 against a CPU reference that sorts each
// segment the way CUB's kernel for it does.
//
// Which kernel sorts a segment (dispatch_segmented_sort.cuh): with at most limits().partitioning_threshold
// segments, one block per segment (the fallback kernel): a warp merge sort (medium policy) up to
// medium_segment_items, a block radix sort above. With more segments, a three-way partition first: segments
// above medium_segment_items are radix sorted (large kernel), those of at most small_segment_items merge sorted
// by the small policy's threads, the rest by the medium policy's.
//
// The radix sorts rank keys by their sign-twiddled bits with -0.0 ranked as +0.0, stably. The merge sorts use
// operator< and are stable. For integers and for doubles without NaN both give "sorted, equal keys in input
// order"; a NaN compares with nothing under operator<, so for merge-sorted segments the reference replays CUB's
// warp merge sort (load with out-of-bounds padding, per-thread odd-even sort, merge-path rounds) exactly.
#include "prim_harness.hpp"

#include <kiln/prim/segmented_sort.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>

using namespace kiln::test;
using kiln::prim::SegmentedSortLimits;

namespace {

// --- the reference --------------------------------------------------------------------------------------

template <typename K>
using Bits = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>;

template <typename K>
Bits<K> bits_of(K x) {
  Bits<K> b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

template <typename K>
K from_bits(Bits<K> b) {
  K x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// The radix sorts' rank of a key: cub::Traits<K>::TwiddleIn, after BaseDigitExtractor::ProcessFloatMinusZero
// for floating point (block/radix_rank_sort_operations.cuh).
template <typename K>
Bits<K> radix_rank(K x) {
  constexpr Bits<K> high = Bits<K>(1) << (8 * sizeof(K) - 1);
  Bits<K> b = bits_of(x);
  if constexpr (std::is_floating_point_v<K>) {
    if (b == high) b = 0;  // -0.0 ranks as +0.0
    return (b & high) ? Bits<K>(~b) : Bits<K>(b ^ high);
  } else {
    return b ^ high;
  }
}

// A stable radix sort's result: sorted by rank; keys of one rank are bitwise equal except -0.0/+0.0, which
// keep their input order.
template <typename K>
void radix_sort_segment(const K* in, K* out, std::size_t n) {
  std::vector<K> zeros;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = in[i];
    if (radix_rank(in[i]) == radix_rank(K(0))) zeros.push_back(in[i]);
  }
  std::sort(out, out + n, [](K a, K b) { return radix_rank(a) < radix_rank(b); });
  if (!zeros.empty()) {
    K* first = std::lower_bound(out, out + n, K(0), [](K a, K b) { return radix_rank(a) < radix_rank(b); });
    std::copy(zeros.begin(), zeros.end(), first);
  }
}

// AgentSubWarpSort::ProcessSegment (agent/agent_sub_warp_merge_sort.cuh) on `threads` threads of
// `ipt` keys each, ascending, with BinaryOpT = operator<, replayed step by step.
template <typename K>
void warp_merge_sort_segment(const K* in, K* out, int n, int threads, int ipt) {
  const auto less = [](K a, K b) { return a < b; };
  if (n < 3) {  // ShortCircuit
    if (n == 1) out[0] = in[0];
    if (n == 2) {
      const K lhs = in[0], rhs = in[1];
      const bool keep = lhs == rhs || less(lhs, rhs);
      out[0] = keep ? lhs : rhs;
      out[1] = keep ? rhs : lhs;
    }
    return;
  }
  // get_oob_default: the bits of Traits<K>::MAX_KEY (a NaN for doubles, INT_MAX for int).
  const K oob = from_bits<K>(Bits<K>(~Bits<K>(0)) ^ (Bits<K>(1) << (8 * sizeof(K) - 1)));
  const int tile = threads * ipt;
  if (n > tile) throw std::logic_error("warp_merge_sort_segment: segment larger than the tile");
  // WarpLoad(…, segment_size, oob_default): blocked, padded.
  std::vector<K> keys(tile);
  for (int i = 0; i < tile; ++i) keys[i] = i < n ? in[i] : oob;

  // BlockMergeSortStrategy::Sort<CompareOp, IS_LAST_TILE = true>(keys, items, less, n, oob) (block_merge_sort.cuh)
  for (int t = 0; t < threads; ++t) {
    K* k = &keys[t * ipt];
    K max_key = oob;
    for (int item = 1; item < ipt; ++item) {
      if (ipt * t + item < n) {
        max_key = less(max_key, k[item]) ? k[item] : max_key;
      } else {
        k[item] = max_key;
      }
    }
    if (ipt * t < n) {  // StableOddEvenSort (thread/thread_sort.cuh)
      for (int i = 0; i < ipt; ++i) {
        for (int j = 1 & i; j < ipt - 1; j += 2) {
          if (less(k[j + 1], k[j])) std::swap(k[j], k[j + 1]);
        }
      }
    }
  }
  for (int target = 2; target <= threads; target *= 2) {
    const int merged = target / 2;
    const int mask = target - 1;
    const std::vector<K> shared = keys;
    // Reads past the tile's end happen only for outputs beyond n, which are never stored.
    const auto at = [&](int i) { return i < tile ? shared[i] : oob; };
    for (int t = 0; t < threads; ++t) {
      const int start = ipt * (~mask & t);
      const int size = ipt * merged;
      const int diag = std::min(n, ipt * (mask & t));
      const int keys1_beg = std::min(n, start);
      const int keys1_end = std::min(n, keys1_beg + size);
      const int keys2_beg = keys1_end;
      const int keys2_end = std::min(n, keys2_beg + size);
      const int keys1_count = keys1_end - keys1_beg;
      const int keys2_count = keys2_end - keys2_beg;
      // MergePath
      int lo = diag < keys2_count ? 0 : diag - keys2_count;
      int hi = std::min(diag, keys1_count);
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (less(at(keys2_beg + diag - 1 - mid), at(keys1_beg + mid))) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      // SerialMerge
      int b1 = keys1_beg + lo, b2 = keys2_beg + diag - lo;
      const int e1 = keys1_end, e2 = keys2_end;
      K key1 = at(b1), key2 = at(b2);
      for (int item = 0; item < ipt; ++item) {
        const bool p = (b2 < e2) && ((b1 >= e1) || less(key2, key1));
        keys[ipt * t + item] = p ? key2 : key1;
        if (p) {
          key2 = at(++b2);
        } else {
          key1 = at(++b1);
        }
      }
    }
  }
  std::copy(keys.begin(), keys.begin() + n, out);  // WarpStore(…, segment_size)
}

// The whole call: `out` holds what keys_out held before it (items outside every segment stay).
template <typename K>
void cpu_segmented_sort(const std::vector<K>& in, std::vector<K>& out, const std::vector<std::int32_t>& offsets,
                        const SegmentedSortLimits& limits) {
  const std::size_t segments = offsets.size() - 1;
  const bool partitioned = segments > limits.partitioning_threshold;
  for (std::size_t s = 0; s < segments; ++s) {
    const std::int64_t begin = offsets[s], end = offsets[s + 1];
    if (end <= begin) continue;
    const auto n = static_cast<std::size_t>(end - begin);
    const K* src = in.data() + begin;
    K* dst = out.data() + begin;
    if (n > limits.medium_segment_items) {
      radix_sort_segment(src, dst, n);
    } else if (partitioned && n <= limits.small_segment_items) {
      warp_merge_sort_segment(src, dst, int(n), int(limits.small_segment_threads),
                              int(limits.small_segment_items / limits.small_segment_threads));
    } else {
      warp_merge_sort_segment(src, dst, int(n), int(limits.medium_segment_threads),
                              int(limits.medium_segment_items / limits.medium_segment_threads));
    }
  }
}

// --- inputs ---------------------------------------------------------------------------------------------

// Segment layouts over n items, as num_segments + 1 offsets.
enum class Layout { one_segment, single_items, few_mixed, many_mixed, edges_fallback, edges_partitioned };

const char* name(Layout l) {
  switch (l) {
    case Layout::one_segment: return "one segment of all items";
    case Layout::single_items: return "every segment one item";
    case Layout::few_mixed: return "few segments (fallback kernel), random lengths, gaps at both ends";
    case Layout::many_mixed: return "many segments (partitioned), random lengths, many empty";
    case Layout::edges_fallback: return "lengths at every kernel's edges, few segments (fallback kernel)";
    case Layout::edges_partitioned: return "lengths at every kernel's edges, many segments (partitioned)";
  }
  return "?";
}

std::vector<std::int32_t> make_offsets(Layout layout, std::size_t n, const SegmentedSortLimits& limits,
                                       unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> offsets;
  switch (layout) {
    case Layout::one_segment:
      return {0, std::int32_t(n)};
    case Layout::single_items:
      for (std::size_t i = 0; i <= n; ++i) offsets.push_back(std::int32_t(i));
      return offsets;
    case Layout::few_mixed: {
      // Exactly the threshold: the most segments CUB still sorts without partitioning. Cut points anywhere in
      // [n/16, n - n/16], so items at both ends belong to no segment and must stay as they were.
      const std::size_t segments = limits.partitioning_threshold;
      std::uniform_int_distribution<std::size_t> cut(n / 16, n - n / 16);
      for (std::size_t i = 0; i <= segments; ++i) offsets.push_back(std::int32_t(cut(rng)));
      std::sort(offsets.begin(), offsets.end());
      // A few long segments as well, when there is room: replace a run of cuts by one segment.
      if (segments > 8) offsets.erase(offsets.begin() + 1, offsets.begin() + 4);
      while (offsets.size() < segments + 1) offsets.insert(offsets.begin() + 1, offsets[1]);  // empty ones
      return offsets;
    }
    case Layout::many_mixed: {
      // Lengths from a mixture of every kernel's range; ~25% empty.
      const std::size_t small = limits.small_segment_items, medium = limits.medium_segment_items;
      const std::size_t large = limits.large_tile_items;
      std::uniform_real_distribution<double> u(0, 1);
      auto length = [&]() -> std::size_t {
        const double r = u(rng);
        auto between = [&](std::size_t lo, std::size_t hi) {
          return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
        };
        if (r < 0.25) return 0;
        if (r < 0.40) return between(1, 2);
        if (r < 0.65) return between(3, small);
        if (r < 0.85) return between(small + 1, medium);
        if (r < 0.99) return between(medium + 1, 4 * large);
        return between(4 * large, 64 * large);
      };
      std::size_t at = 0;
      offsets.push_back(0);
      while (at < n) {
        at = std::min(n, at + length());
        offsets.push_back(std::int32_t(at));
      }
      // Always partitioned: pad with empty segments at random places.
      while (offsets.size() < limits.partitioning_threshold + 2) {
        const std::size_t i = std::uniform_int_distribution<std::size_t>(0, offsets.size() - 1)(rng);
        offsets.insert(offsets.begin() + std::ptrdiff_t(i), offsets[i]);
      }
      return offsets;
    }
    case Layout::edges_fallback:
    case Layout::edges_partitioned: {
      // Lengths on both sides of each threshold, in turn, until the items or (fallback) the segments run out.
      const std::size_t small = limits.small_segment_items, medium = limits.medium_segment_items;
      const std::size_t large = limits.large_tile_items;
      const std::size_t lengths[] = {0, 1, 2, 3, small - 1, small, small + 1, medium - 1, medium, medium + 1,
                                     large - 1, large, large + 1, 2 * large + 1};
      const bool fallback = layout == Layout::edges_fallback;
      std::size_t at = 0, i = 0;
      offsets.push_back(0);
      while (at < n && !(fallback && offsets.size() > limits.partitioning_threshold)) {
        at = std::min(n, at + lengths[i++ % std::size(lengths)]);
        offsets.push_back(std::int32_t(at));
      }
      while (!fallback && offsets.size() < limits.partitioning_threshold + 2) offsets.push_back(std::int32_t(at));
      return offsets;
    }
  }
  return offsets;
}

template <typename K>
std::vector<K> make_keys(std::size_t n, unsigned seed) {
  if constexpr (std::is_floating_point_v<K>) {
    // Reals with 1/64 of them special: -0.0, +0.0, ±inf, NaNs of both signs and different payloads.
    std::vector<K> keys = random_vector<K>(n, seed, K(-1000), K(1000));
    const K specials[] = {K(-0.0), K(0.0), std::numeric_limits<K>::infinity(), -std::numeric_limits<K>::infinity(),
                          std::numeric_limits<K>::quiet_NaN(), -std::numeric_limits<K>::quiet_NaN(),
                          from_bits<K>(0x7ff0000000000001ull), from_bits<K>(0xfff8000000000123ull)};
    std::mt19937_64 rng(seed ^ 0x5eed);
    std::uniform_int_distribution<std::size_t> which(0, std::size(specials) - 1);
    for (std::size_t i = 0; i < n; ++i) {
      if ((rng() & 63) == 0) keys[i] = specials[which(rng)];
    }
    return keys;
  } else {
    // Negatives and positives; every other seed over a narrow range, so segments hold repeated keys.
    return seed % 2 ? random_vector<K>(n, seed, std::numeric_limits<K>::min(), std::numeric_limits<K>::max())
                    : random_vector<K>(n, seed, K(-1000), K(1000));
  }
}

// --- the runs -------------------------------------------------------------------------------------------

// Runs the plan (owned storage, caller storage) and the one-shot function on poisoned outputs; each must match.
template <typename K>
void check_layout(kiln::prim::SegmentedSort<K>& plan, const std::vector<K>& keys,
                  const std::vector<std::int32_t>& offsets) {
  const std::size_t n = keys.size();
  const std::size_t segments = offsets.size() - 1;
  DeviceArray<K> d_in(keys), d_out(n);
  DeviceArray<std::int32_t> d_offsets(offsets);

  // The expected output over poisoned memory: 0xCD bytes wherever no segment writes.
  std::vector<K> want(n);
  std::memset(want.data(), 0xCD, n * sizeof(K));
  cpu_segmented_sort(keys, want, offsets, plan.limits());

  d_out.poison();
  plan(d_in.get(), d_out.get(), n, segments, d_offsets.get());
  synchronize();
  KILN_CHECK_SAME(d_out.download(), want);

  DeviceArray<std::uint8_t> temp(plan.temp_bytes(n, segments));
  d_out.poison();
  plan(d_in.get(), d_out.get(), n, segments, d_offsets.get(), kiln::prim::TempStorage{temp.get(), temp.size()});
  synchronize();
  KILN_CHECK_SAME(d_out.download(), want);

  d_out.poison();
  kiln::prim::segmented_sort(d_in.get(), d_out.get(), n, segments, d_offsets.get());
  synchronize();
  KILN_CHECK_SAME(d_out.download(), want);

  // The input is never written.
  KILN_CHECK_SAME(d_in.download(), keys);
}

template <typename K>
void check_segmented_sort() {
  PrimContext context;
  kiln::prim::SegmentedSort<K> plan;
  check_source(plan.kernel());
  const SegmentedSortLimits limits = plan.limits();
  REQUIRE(limits.partitioning_threshold > 0);
  REQUIRE(limits.small_segment_items < limits.medium_segment_items);
  REQUIRE(limits.medium_segment_items < limits.large_tile_items);
  unsigned seed = 1;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    for (Layout layout : {Layout::one_segment, Layout::single_items, Layout::few_mixed, Layout::many_mixed,
                          Layout::edges_fallback, Layout::edges_partitioned}) {
      CAPTURE(n);
      INFO("layout: ", name(layout));
      const auto offsets = make_offsets(layout, n, limits, seed);
      const auto keys = make_keys<K>(n, seed);
      ++seed;
      check_layout(plan, keys, offsets);
    }
  }
}

// The reference's merge sort replay agrees with a stable sort wherever operator< is a strict weak order.
template <typename K>
void check_replay_without_nan() {
  std::mt19937_64 rng(7);
  for (int threads : {2, 4, 8, 16, 32}) {
    for (int ipt : {1, 2, 3, 4, 7, 9, 11}) {
      for (int n = 0; n <= threads * ipt; ++n) {
        std::vector<K> in(std::size_t(n) + 1), got(std::size_t(n) + 1);
        for (auto& x : in) {
          if constexpr (std::is_floating_point_v<K>) {
            x = (rng() % 4 == 0) ? ((rng() & 1) ? K(-0.0) : K(0.0)) : K(int(rng() % 21) - 10);
          } else {
            x = K(int(rng() % 21) - 10);
          }
        }
        warp_merge_sort_segment(in.data(), got.data(), n, threads, ipt);
        std::vector<K> want(in.begin(), in.begin() + n);
        std::stable_sort(want.begin(), want.end());
        got.resize(std::size_t(n));
        CAPTURE(threads);
        CAPTURE(ipt);
        CAPTURE(n);
        KILN_CHECK_SAME(got, want);
      }
    }
  }
}

}  // namespace

TEST_CASE("segmented_sort: the reference's warp merge sort replay is a stable sort without NaN") {
  check_replay_without_nan<std::int32_t>();
  check_replay_without_nan<double>();
}

TEST_CASE("segmented_sort_i32 matches the CPU") { check_segmented_sort<std::int32_t>(); }
TEST_CASE("segmented_sort_f64 matches the CPU (-0.0, +0.0, +-inf, NaN included)") { check_segmented_sort<double>(); }

TEST_CASE("segmented_sort: all-equal keys keep their order (f64: -0.0 and +0.0 mixed)") {
  PrimContext context;
  const std::size_t n = 1000003;
  {
    kiln::prim::SegmentedSort<std::int32_t> plan;
    const std::vector<std::int32_t> keys(n, -7);
    for (Layout layout : {Layout::one_segment, Layout::few_mixed, Layout::many_mixed}) {
      INFO("i32, layout: ", name(layout));
      check_layout(plan, keys, make_offsets(layout, n, plan.limits(), 11));
    }
  }
  {
    kiln::prim::SegmentedSort<double> plan;
    std::vector<double> keys(n);
    std::mt19937 rng(12);
    for (auto& x : keys) x = (rng() & 1) ? -0.0 : 0.0;
    for (Layout layout : {Layout::one_segment, Layout::few_mixed, Layout::many_mixed}) {
      INFO("f64, layout: ", name(layout));
      check_layout(plan, keys, make_offsets(layout, n, plan.limits(), 13));
    }
  }
}

TEST_CASE("segmented_sort: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::SegmentedSort<std::int32_t> plan;
  const std::size_t n = 1 << 20;
  DeviceArray<std::int32_t> d(n);
  DeviceArray<std::int32_t> offsets(std::vector<std::int32_t>{0, std::int32_t(n)});
  REQUIRE(plan.temp_bytes(n, 1) > 1);
  CHECK_THROWS_AS(plan(d.get(), d.get(), n, 1, offsets.get(), kiln::prim::TempStorage{d.get(), 1}),
                  kiln::Error);
}
