// Lower_bound/upper_bound_{i32,i64,f64,u64} against std::lower_bound and
// std::upper_bound (operator<) on the CPU.
#include "prim_harness.hpp"

#include <kiln/prim/search.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <type_traits>

using namespace kiln::test;
using kiln::prim::Side;

namespace {

// A sorted haystack with runs of duplicates: a start plus cumulative gaps, a quarter of them 0. Doubles
// are integers and halves, and their zeros are -0.0 or +0.0 at random (equal under operator<, so still
// sorted). Integers start far enough above their minimum (u64 at 1000) that needles below exist.
template <typename T>
std::vector<T> make_haystack(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> h(n);
  if constexpr (std::is_floating_point_v<T>) {
    double v = -0.5 * double(n);
    for (auto& x : h) {
      const std::uint64_t r = rng();
      v += (r & 3) == 0 ? 0.0 : 0.5 * double(1 + (r >> 2) % 4);
      x = v == 0.0 && (r >> 10) & 1 ? -0.0 : v;
    }
  } else {
    const std::uint64_t max_gap = std::is_same_v<T, std::int32_t> ? 15 : (std::uint64_t{1} << 20);
    T v = std::is_signed_v<T> ? T(-std::int64_t(n) * std::int64_t(max_gap) / 4) : T(1000);
    for (auto& x : h) {
      const std::uint64_t r = rng();
      v = T(v + ((r & 3) == 0 ? 0 : T(1 + (r >> 2) % max_gap)));
      x = v;
    }
  }
  return h;
}

// Needles in any order: equal to haystack elements, just beside them, below the first, above the last,
// uniform over the range, and repeats of earlier needles. Doubles add NaN, infinities and signed zeros.
template <typename T>
std::vector<T> make_needles(std::size_t m, const std::vector<T>& hay, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> needles(m);
  const T lo = hay.empty() ? T(0) : hay.front();
  const T hi = hay.empty() ? T(100) : hay.back();
  for (std::size_t i = 0; i < m; ++i) {
    const std::uint64_t r = rng();
    const T element = hay.empty() ? T(r % 100) : hay[(r >> 8) % hay.size()];
    T x;
    switch (r % 16) {
      case 0: case 1: case 2: case 3: x = element; break;
      case 4: case 5: x = T(element + T(1)); break;
      case 6: case 7: x = T(element - T(1)); break;
      case 8: x = T(lo - T(1 + (r >> 40) % 100)); break;
      case 9: x = T(hi + T(1 + (r >> 40) % 100)); break;
      case 10: case 11: x = i ? needles[(r >> 8) % i] : element; break;
      default:
        if constexpr (std::is_floating_point_v<T>) {
          x = lo + (hi - lo) * double(r >> 11) * 0x1p-53;
        } else {
          x = T(lo + T((r >> 8) % (std::uint64_t(hi - lo) + 1)));
        }
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (r % 101 == 0) {
        const T special[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                             std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(), 0.0, -0.0,
                             std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min()};
        x = special[(r >> 20) % 8];
      }
    }
    needles[i] = x;
  }
  return needles;
}

// std::lower_bound / std::upper_bound with operator<, on every core (2^26 random probes of a 2^26 haystack).
template <Side S, typename T>
std::vector<std::int64_t> cpu_search(const std::vector<T>& hay, const std::vector<T>& needles) {
  std::vector<std::int64_t> out(needles.size());
  const std::size_t threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const std::size_t chunk = (needles.size() + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::size_t i = t * chunk; i < std::min(needles.size(), (t + 1) * chunk); ++i) {
        const auto it = S == Side::lower ? std::lower_bound(hay.begin(), hay.end(), needles[i])
                                         : std::upper_bound(hay.begin(), hay.end(), needles[i]);
        out[i] = it - hay.begin();
      }
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

template <typename T, Side S>
void run_and_check(const kiln::prim::SortedSearch<T, S>& plan, const std::vector<T>& hay,
                   const std::vector<T>& needles) {
  const auto want = cpu_search<S>(hay, needles);
  DeviceArray<T> d_hay(hay), d_needles(needles);
  DeviceArray<std::int64_t> d_out(needles.size());
  d_out.poison();
  plan(d_hay.get(), hay.size(), d_needles.get(), d_out.get(), needles.size());
  KILN_CHECK_SAME(d_out.download(), want);
  // The one-shot function gives the same result.
  d_out.poison();
  if constexpr (S == Side::lower) {
    kiln::prim::lower_bound(d_hay.get(), hay.size(), d_needles.get(), d_out.get(), needles.size());
  } else {
    kiln::prim::upper_bound(d_hay.get(), hay.size(), d_needles.get(), d_out.get(), needles.size());
  }
  synchronize();
  KILN_CHECK_SAME(d_out.download(), want);
}

template <typename T, Side S>
void check_search() {
  PrimContext context;
  kiln::prim::SortedSearch<T, S> plan;
  check_source(plan.kernel());
  unsigned seed = 1;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    const auto hay = make_haystack<T>(n, seed++);
    // As many needles as haystack elements (the kernel's tiles are needles), and a few on every haystack.
    for (std::size_t m : {n, std::size_t{777}}) {
      CAPTURE(n);
      CAPTURE(m);
      run_and_check(plan, hay, make_needles<T>(m, hay, seed++));
    }
  }
}

}  // namespace

TEST_CASE("lower_bound_i32 matches std::lower_bound") { check_search<std::int32_t, Side::lower>(); }
TEST_CASE("lower_bound_i64 matches std::lower_bound") { check_search<std::int64_t, Side::lower>(); }
TEST_CASE("lower_bound_f64 matches std::lower_bound") { check_search<double, Side::lower>(); }
TEST_CASE("lower_bound_u64 matches std::lower_bound") { check_search<std::uint64_t, Side::lower>(); }
TEST_CASE("upper_bound_i32 matches std::upper_bound") { check_search<std::int32_t, Side::upper>(); }
TEST_CASE("upper_bound_i64 matches std::upper_bound") { check_search<std::int64_t, Side::upper>(); }
TEST_CASE("upper_bound_f64 matches std::upper_bound") { check_search<double, Side::upper>(); }
TEST_CASE("upper_bound_u64 matches std::upper_bound") { check_search<std::uint64_t, Side::upper>(); }

// What the header promises for doubles, spelled out: NaN needles go to 0 (lower) and to the end (upper),
// -0.0 and +0.0 are one value, infinities are ordinary values.
TEST_CASE("lower_bound/upper_bound_f64: NaN, infinities and signed zeros follow operator<") {
  PrimContext context;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> hay = {-inf, -1.0, -0.0, 0.0, -0.0, 2.0, inf, inf};
  const std::vector<double> needles = {nan, -nan, -inf, inf, 0.0, -0.0, -1.0, 3.0, 1e308, -1e308};
  const std::vector<std::int64_t> want_lower = {0, 0, 0, 6, 2, 2, 1, 6, 6, 1};
  const std::vector<std::int64_t> want_upper = {8, 8, 1, 8, 5, 5, 2, 6, 6, 1};
  REQUIRE(cpu_search<Side::lower>(hay, needles) == want_lower);
  REQUIRE(cpu_search<Side::upper>(hay, needles) == want_upper);
  DeviceArray<double> d_hay(hay), d_needles(needles);
  DeviceArray<std::int64_t> d_out(needles.size());
  d_out.poison();
  kiln::prim::LowerBound<double>()(d_hay.get(), hay.size(), d_needles.get(), d_out.get(), needles.size());
  CHECK(d_out.download() == want_lower);
  d_out.poison();
  kiln::prim::UpperBound<double>()(d_hay.get(), hay.size(), d_needles.get(), d_out.get(), needles.size());
  CHECK(d_out.download() == want_upper);
}

TEST_CASE("lower_bound/upper_bound: an empty haystack puts every needle at 0; no needles write nothing") {
  PrimContext context;
  const std::vector<std::int64_t> needles = {5, -3, 0, std::numeric_limits<std::int64_t>::max()};
  DeviceArray<std::int64_t> d_needles(needles), d_hay(std::size_t{0}), d_out(needles.size());
  for (Side side : {Side::lower, Side::upper}) {
    d_out.poison();
    if (side == Side::lower) {
      kiln::prim::LowerBound<std::int64_t>()(d_hay.get(), 0, d_needles.get(), d_out.get(), needles.size());
    } else {
      kiln::prim::UpperBound<std::int64_t>()(d_hay.get(), 0, d_needles.get(), d_out.get(), needles.size());
    }
    CHECK(d_out.download() == std::vector<std::int64_t>(needles.size(), 0));
  }
  const std::vector<std::int64_t> hay = {1, 2, 3};
  DeviceArray<std::int64_t> d_hay3(hay);
  d_out.poison();
  kiln::prim::LowerBound<std::int64_t>()(d_hay3.get(), hay.size(), d_needles.get(), d_out.get(), 0);
  std::int64_t poison;
  std::memset(&poison, 0xCD, sizeof poison);
  CHECK(d_out.download() == std::vector<std::int64_t>(needles.size(), poison));
}
