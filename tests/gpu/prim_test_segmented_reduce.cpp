// Segmented_reduce_{sum_i32, sum_f64, min_f64, max_f64}
// (cub::DeviceSegmentedReduce::Sum/Min/Max) against CPU models of CUB's rules.
//
// The models (kiln/prim/segmented_reduce.hpp says why):
//  - sum i32: exact, wrapping. sum f64: |got - exact| <= 1e-9 * sum(|x|) for random reals (the exact sum in
//    long double; CUB's error is ~1e-14 of that), bit for bit for integer values, +0.0 for segments of
//    zeros of either sign.
//  - min/max f64 on NaN-free data: the extreme element by value, then op(init, extreme) with CUB's init
//    (DBL_MAX for min, -DBL_MAX for max) on the left. That is order-independent except for the sign of a
//    zero extreme when the segment holds both -0.0 and +0.0: there any zero is accepted.
//  - NaN: order-dependent in general (CUB's comparisons make min(x, NaN) = NaN, min(NaN, x) = x), so only
//    the order-independent rules are checked: a segment of only NaN gives that NaN under min and -DBL_MAX
//    under max; any result is NaN, one of the segment's elements or init; a sum holding NaN is NaN.
#include "prim_harness.hpp"

#include <kiln/prim/segmented_reduce.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln::test;
using kiln::prim::ReduceOp;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMax = std::numeric_limits<double>::max();
constexpr double kLowest = std::numeric_limits<double>::lowest();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::uint64_t bits(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
bool same(double a, double b) { return bits(a) == bits(b); }

// Segment lengths summing to `total`: a mix of empty, single-item, short, around-a-tile and (rarely) long
// segments, shuffled, with empty segments at both ends.
std::vector<std::int32_t> random_offsets(std::size_t total, std::size_t tile, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> lengths{0};
  std::size_t sum = 0;
  while (sum < total) {
    const unsigned kind = unsigned(rng() % 100);
    std::size_t len;
    if (kind < 15) len = 0;
    else if (kind < 30) len = 1;
    else if (kind < 90) len = 2 + rng() % 2000;        // ~1000 on average
    else if (kind < 98) len = tile - 1 + rng() % 3;    // a tile's edges
    else len = tile * (2 + rng() % 20) + rng() % tile;  // several tiles, for one block
    len = std::min(len, total - sum);
    lengths.push_back(len);
    sum += len;
  }
  std::shuffle(lengths.begin(), lengths.end(), rng);
  lengths.push_back(0);
  std::vector<std::int32_t> offsets{0};
  for (std::size_t len : lengths) offsets.push_back(offsets.back() + std::int32_t(len));
  return offsets;
}

// Lengths around one block's tile, and the empty and single-item segments, in a fixed layout.
std::vector<std::int32_t> edge_offsets(std::size_t tile) {
  const std::size_t lengths[] = {0, 1, 0, 0, tile - 1, tile, tile + 1, 2, 3 * tile + 17, 1, 0, 2 * tile, 5, 0};
  std::vector<std::int32_t> offsets{0};
  for (std::size_t len : lengths) offsets.push_back(offsets.back() + std::int32_t(len));
  return offsets;
}

template <ReduceOp Op>
double cub_init() {
  if constexpr (Op == ReduceOp::sum) return 0.0;
  else if constexpr (Op == ReduceOp::min) return kMax;
  else return kLowest;
}

// What is wrong with segment s of `got`, or "" when it follows the model.
template <typename T, ReduceOp Op>
std::string check_segment(const std::vector<T>& in, std::int32_t begin, std::int32_t end, T got, bool exact_sum) {
  std::ostringstream wrong;
  if constexpr (std::is_same_v<T, std::int32_t>) {
    std::uint32_t sum = 0;
    for (std::int32_t i = begin; i < end; ++i) sum += static_cast<std::uint32_t>(in[i]);
    if (got != static_cast<std::int32_t>(sum)) wrong << "got " << got << ", want " << static_cast<std::int32_t>(sum);
  } else if constexpr (Op == ReduceOp::sum) {
    long double sum = 0, abs_sum = 0;
    bool nan = false;
    for (std::int32_t i = begin; i < end; ++i) sum += in[i], abs_sum += std::fabs(in[i]), nan |= std::isnan(in[i]);
    if (nan) {
      if (!std::isnan(got)) wrong << "got " << got << ", want NaN";
    } else if (abs_sum == 0 || exact_sum) {
      if (!same(got, static_cast<double>(sum))) wrong << "got " << got << ", want exactly " << static_cast<double>(sum);
    } else if (!(std::fabs(static_cast<long double>(got) - sum) <= 1e-9L * abs_sum)) {
      wrong << "got " << got << ", want " << static_cast<double>(sum) << " within 1e-9 of " << static_cast<double>(abs_sum);
    }
  } else {
    const double init = cub_init<Op>();
    bool any = false, neg_zero = false, pos_zero = false, nan = false;
    double extreme = 0;
    for (std::int32_t i = begin; i < end; ++i) {
      const double x = in[i];
      nan |= std::isnan(x);
      if (!any || (Op == ReduceOp::min ? x < extreme : extreme < x)) extreme = x;
      any = true;
    }
    if (nan) {
      // Order-dependent; what holds in any order: the result is an element, init or NaN.
      bool found = std::isnan(got) || same(got, init);
      for (std::int32_t i = begin; i < end && !found; ++i) found = same(got, in[i]);
      if (!found) wrong << "got " << got << ", which is neither NaN, init nor an element of the segment";
      return wrong.str();
    }
    for (std::int32_t i = begin; i < end; ++i) {
      neg_zero |= same(in[i], -0.0);
      pos_zero |= same(in[i], +0.0);
    }
    // CUB's last step: op(init, aggregate), init on the left; min = (a < b) ? a : b, max = (a < b) ? b : a.
    const double want = !any ? init : Op == ReduceOp::min ? (init < extreme ? init : extreme)
                                                          : (init < extreme ? extreme : init);
    if (want == 0 && neg_zero && pos_zero) {
      if (got != 0) wrong << "got " << got << ", want a zero of either sign";
    } else if (!same(got, want)) {
      wrong << "got " << got << ", want " << want;
    }
  }
  return wrong.str();
}

template <typename T, ReduceOp Op>
void check_segments(const std::vector<T>& in, const std::vector<std::int32_t>& offsets, const std::vector<T>& got,
                    bool exact_sum = false) {
  REQUIRE(got.size() + 1 == offsets.size());
  std::size_t failures = 0;
  for (std::size_t s = 0; s < got.size(); ++s) {
    const std::string wrong = check_segment<T, Op>(in, offsets[s], offsets[s + 1], got[s], exact_sum);
    if (!wrong.empty() && ++failures <= 5) {
      FAIL_CHECK("segment " << s << " of " << got.size() << " [" << offsets[s] << ", " << offsets[s + 1]
                            << "): " << wrong);
    }
  }
  CHECK_MESSAGE(failures == 0, failures << " segments wrong");
}

// The three ways to call (owned storage, caller storage, one-shot), each from a poisoned output; all
// must give the same bits (one kernel, CUB's fixed order per segment).
template <typename T, ReduceOp Op>
void check_layout(kiln::prim::SegmentedReduce<T, Op>& plan, const std::vector<T>& in,
                  const std::vector<std::int32_t>& offsets, bool exact_sum = false) {
  const std::size_t segments = offsets.size() - 1;
  CAPTURE(segments);
  DeviceArray<T> d_in(in), d_out(segments);
  DeviceArray<std::int32_t> d_offsets(offsets);
  d_out.poison();
  plan(d_in.get(), d_out.get(), segments, d_offsets.get());
  const std::vector<T> got = d_out.download();
  check_segments<T, Op>(in, offsets, got, exact_sum);

  DeviceArray<std::uint8_t> temp(plan.temp_bytes(segments));
  d_out.poison();
  plan(d_in.get(), d_out.get(), segments, d_offsets.get(), kiln::prim::TempStorage{temp.get(), temp.size()});
  KILN_CHECK_SAME(d_out.download(), got);

  d_out.poison();
  kiln::prim::segmented_reduce<Op>(d_in.get(), d_out.get(), segments, d_offsets.get());
  synchronize();
  KILN_CHECK_SAME(d_out.download(), got);
}

template <typename T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return random_vector<std::int32_t>(n, seed, std::numeric_limits<std::int32_t>::min(),
                                       std::numeric_limits<std::int32_t>::max());
  } else {
    return random_vector<double>(n, seed, -1000.0, 1000.0);
  }
}

// Random reals with -0.0, +0.0, +inf and -inf sprinkled in (about 1% each); no NaN.
std::vector<double> with_specials(std::vector<double> v, unsigned seed) {
  std::mt19937_64 rng(seed);
  const double specials[] = {-0.0, +0.0, kInf, -kInf};
  for (auto& x : v) {
    const unsigned r = unsigned(rng() % 100);
    if (r < 4) x = specials[r];
  }
  return v;
}

// Every size of the list as the total of a random layout, one segment of 2^26 items, and one of
// 2^26 - 1 starting at an odd offset (CUB's unvectorised loads).
template <typename T, ReduceOp Op>
void check_spec() {
  PrimContext context;
  kiln::prim::SegmentedReduce<T, Op> plan;
  check_source(plan.kernel());
  const std::size_t tile = plan.tile_items();
  unsigned seed = 1000 + 10 * unsigned(Op);
  for (std::size_t n : sizes_around(tile)) {
    CAPTURE(n);
    auto in = random_values<T>(n, seed++);
    if constexpr (Op != ReduceOp::sum) in = with_specials(std::move(in), seed++);
    check_layout(plan, in, random_offsets(n, tile, seed++));
  }
  {
    INFO("around a tile");
    const auto offsets = edge_offsets(tile);
    check_layout(plan, random_values<T>(std::size_t(offsets.back()), seed++), offsets);
  }
  const std::size_t huge = std::size_t{1} << 26;
  const auto in = random_values<T>(huge, seed++);
  {
    INFO("one segment of 2^26 items");
    check_layout(plan, in, {0, std::int32_t(huge)});
  }
  {
    INFO("one item, then one segment of 2^26 - 1 items at an odd offset");
    check_layout(plan, in, {0, 1, std::int32_t(huge)});
  }
}

}  // namespace

TEST_CASE("segmented_reduce_sum_i32 matches the CPU's wrapping sums") { check_spec<std::int32_t, ReduceOp::sum>(); }
TEST_CASE("segmented_reduce_sum_f64 matches the CPU within rounding") { check_spec<double, ReduceOp::sum>(); }
TEST_CASE("segmented_reduce_min_f64 matches the CPU, with zeros and infinities") { check_spec<double, ReduceOp::min>(); }
TEST_CASE("segmented_reduce_max_f64 matches the CPU, with zeros and infinities") { check_spec<double, ReduceOp::max>(); }

TEST_CASE("segmented_reduce_sum_f64 of integer values is exact; zeros of either sign sum to +0.0") {
  PrimContext context;
  kiln::prim::SegmentedSum<double> plan;
  const std::size_t n = 1000003;
  const auto ints = random_vector<std::int32_t>(n, 7, -1000, 1000);
  check_layout(plan, std::vector<double>(ints.begin(), ints.end()), random_offsets(n, plan.tile_items(), 8), true);
  std::vector<double> zeros(3 * plan.tile_items(), -0.0);
  for (std::size_t i = 0; i < zeros.size(); i += 3) zeros[i] = +0.0;
  // Lone +0.0 and -0.0, then runs of both signs: every segment sums to +0.0 (CUB adds the +0.0 start value
  // last).
  check_layout(plan, zeros, {0, 1, 2, 3, 4, 4 + std::int32_t(plan.tile_items()), std::int32_t(zeros.size())});
}

TEST_CASE("segmented_reduce min/max: CUB's start values for empty segments and lone infinities") {
  PrimContext context;
  kiln::prim::SegmentedMin<double> min;
  kiln::prim::SegmentedMax<double> max;
  // Segments: {}, {+inf}, {-inf}, {-0.0}, {+0.0}, {DBL_MAX}, {-DBL_MAX}, {-0.0, +0.0, 1}, {-0.0, -1, +0.0},
  // {1, -inf, +inf, 3}, {min subnormal, -min subnormal}, 5000 x +inf, 5000 x -inf, 5000 x -0.0.
  const double sub = std::numeric_limits<double>::denorm_min();
  std::vector<double> in = {kInf, -kInf, -0.0, +0.0, kMax, kLowest, -0.0, +0.0, 1, -0.0, -1, +0.0, 1, -kInf, kInf, 3,
                            sub, -sub};
  std::vector<std::int32_t> offsets = {0, 0, 1, 2, 3, 4, 5, 6, 9, 12, 16, 18};
  for (double fill : {kInf, -kInf, -0.0}) {
    in.insert(in.end(), 5000, fill);
    offsets.push_back(std::int32_t(in.size()));
  }
  check_layout(min, in, offsets);
  check_layout(max, in, offsets);

  // The rules the model encodes, spelled out for the segments that show them.
  DeviceArray<double> d_in(in), d_out(offsets.size() - 1);
  DeviceArray<std::int32_t> d_offsets(offsets);
  min(d_in.get(), d_out.get(), offsets.size() - 1, d_offsets.get());
  auto got = d_out.download();
  CHECK(same(got[0], kMax));    // empty: numeric_limits<double>::max(), not +inf
  CHECK(same(got[1], kMax));    // {+inf}: DBL_MAX < inf, init wins
  CHECK(same(got[2], -kInf));
  CHECK(same(got[3], -0.0));
  CHECK(same(got[11], kMax));   // 5000 x +inf
  CHECK(same(got[13], -0.0));   // 5000 x -0.0
  max(d_in.get(), d_out.get(), offsets.size() - 1, d_offsets.get());
  got = d_out.download();
  CHECK(same(got[0], kLowest));  // empty: numeric_limits<double>::lowest(), not -inf
  CHECK(same(got[1], kInf));
  CHECK(same(got[2], kLowest));  // {-inf}: init wins
  CHECK(same(got[3], -0.0));
  CHECK(same(got[12], kLowest)); // 5000 x -inf
  CHECK(same(got[13], -0.0));
}

TEST_CASE("segmented_reduce with NaN: the order-independent rules") {
  PrimContext context;
  kiln::prim::SegmentedMin<double> min;
  kiln::prim::SegmentedMax<double> max;
  kiln::prim::SegmentedSum<double> sum;
  const std::size_t tile = min.tile_items();
  // Segments of only NaN (1, 7, a tile, a tile + 1, three tiles), then random data with 2% NaN.
  std::vector<double> in;
  std::vector<std::int32_t> offsets{0};
  const std::size_t nan_lengths[] = {1, 7, tile, tile + 1, 3 * tile};
  for (std::size_t len : nan_lengths) {
    in.insert(in.end(), len, kNaN);
    offsets.push_back(std::int32_t(in.size()));
  }
  const std::size_t nan_segments = offsets.size() - 1;
  std::vector<double> rest = random_vector<double>(1000003, 31, -1000.0, 1000.0);
  std::mt19937_64 rng(32);
  for (auto& x : rest) if (rng() % 50 == 0) x = kNaN;
  for (std::int32_t o : random_offsets(rest.size(), tile, 33)) {
    if (o > 0) offsets.push_back(std::int32_t(in.size()) + o);
  }
  in.insert(in.end(), rest.begin(), rest.end());
  REQUIRE(std::size_t(offsets.back()) == in.size());

  check_layout(min, in, offsets);
  check_layout(max, in, offsets);
  check_layout(sum, in, offsets);

  DeviceArray<double> d_in(in), d_out(offsets.size() - 1);
  DeviceArray<std::int32_t> d_offsets(offsets);
  min(d_in.get(), d_out.get(), offsets.size() - 1, d_offsets.get());
  auto got = d_out.download();
  for (std::size_t s = 0; s < nan_segments; ++s) CHECK(same(got[s], kNaN));  // NaN op NaN, then min(DBL_MAX, NaN)
  max(d_in.get(), d_out.get(), offsets.size() - 1, d_offsets.get());
  got = d_out.download();
  for (std::size_t s = 0; s < nan_segments; ++s) CHECK(same(got[s], kLowest));  // max(-DBL_MAX, NaN) keeps the left
}

TEST_CASE("segmented_reduce: no segments writes nothing; too little caller storage is an error") {
  PrimContext context;
  kiln::prim::SegmentedSum<std::int32_t> plan;
  DeviceArray<std::int32_t> in(std::vector<std::int32_t>{1, 2, 3}), out(2), offsets(std::vector<std::int32_t>{0, 3});
  out.poison();
  const std::vector<std::int32_t> poisoned = out.download();
  CHECK(plan.temp_bytes(0) == 0);
  plan(in.get(), out.get(), 0, offsets.get(), kiln::prim::TempStorage{});
  plan(in.get(), out.get(), 0, offsets.get());
  kiln::prim::segmented_reduce<ReduceOp::sum>(in.get(), out.get(), 0, offsets.get());
  synchronize();
  KILN_CHECK_SAME(out.download(), poisoned);
  // One segment needs (and CUB insists on) non-null storage, though it is never touched.
  CHECK(plan.temp_bytes(1) == 1);
  CHECK_THROWS_AS(plan(in.get(), out.get(), 1, offsets.get(), kiln::prim::TempStorage{}), kiln::Error);
}
