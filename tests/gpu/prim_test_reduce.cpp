// Reduce_i32/f64 (cub::DeviceReduce::Sum) against a CPU sum.
//
// i32 is compared exactly (wrapping: the inputs span the whole int32 range). f64 is added in CUB's tree
// order, so random reals are compared with a tolerance: |got - exact| <= 1e-9 * sum(|x|), the exact sum
// taken in long double. CUB's rounding error is at most sum(|x|) * 2^-53 * (longest chain of additions,
// ~100 at 2^26 items), about 1e-14 * sum(|x|): the tolerance leaves a wide margin yet catches a dropped
// or doubled item of any magnitude above 1e-9 of the total. Integer-valued f64 data, whose sums are exact
// in any order, are compared bit for bit.
#include "prim_harness.hpp"

#include <kiln/prim/reduce.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace kiln::test;

namespace {

std::int32_t cpu_sum(const std::vector<std::int32_t>& in) {
  std::uint32_t sum = 0;  // wrapping, as the GPU's: signed overflow would be undefined on the CPU
  for (std::int32_t x : in) sum += static_cast<std::uint32_t>(x);
  return static_cast<std::int32_t>(sum);
}

struct RealSum {
  long double sum = 0;
  long double abs_sum = 0;
};

RealSum cpu_sum(const std::vector<double>& in) {
  RealSum s;
  for (double x : in) s.sum += x, s.abs_sum += std::fabs(x);
  return s;
}

// The three ways to call: owned storage, caller storage, one-shot. Each result from a poisoned output.
template <typename T>
std::vector<T> reduce_three_ways(kiln::prim::ReduceSum<T>& plan, const DeviceArray<T>& in, std::size_t n) {
  std::vector<T> got;
  DeviceArray<T> out(1);
  out.poison();
  plan(in.get(), out.get(), n);
  got.push_back(out.download()[0]);

  DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
  out.poison();
  plan(in.get(), out.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
  got.push_back(out.download()[0]);

  out.poison();
  kiln::prim::reduce_sum(in.get(), out.get(), n);
  synchronize();
  got.push_back(out.download()[0]);
  return got;
}

}  // namespace

TEST_CASE("reduce_i32 matches the CPU's wrapping sum") {
  PrimContext context;
  kiln::prim::ReduceSum<std::int32_t> plan;
  check_source(plan.kernel());
  unsigned seed = 1;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::int32_t>(n, seed++, std::numeric_limits<std::int32_t>::min(),
                                                std::numeric_limits<std::int32_t>::max());
    DeviceArray<std::int32_t> d_in(in);
    KILN_CHECK_SAME(reduce_three_ways(plan, d_in, n), std::vector<std::int32_t>(3, cpu_sum(in)));
  }
}

TEST_CASE("reduce_f64 matches the CPU within rounding, and the same bits on every call") {
  PrimContext context;
  kiln::prim::ReduceSum<double> plan;
  check_source(plan.kernel());
  unsigned seed = 100;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<double>(n, seed++, -1000.0, 1000.0);
    DeviceArray<double> d_in(in);
    const auto got = reduce_three_ways(plan, d_in, n);
    const RealSum want = cpu_sum(in);
    const long double error = std::fabs(static_cast<long double>(got[0]) - want.sum);
    CHECK_MESSAGE(error <= 1e-9L * want.abs_sum,
                  "got " << got[0] << ", exact " << static_cast<double>(want.sum) << ", sum(|x|) "
                         << static_cast<double>(want.abs_sum));
    // One plan, one grid: run to run the same order of additions.
    KILN_CHECK_SAME(got, std::vector<double>(3, got[0]));
  }
}

TEST_CASE("reduce_f64 of integer values is exact in any order") {
  PrimContext context;
  kiln::prim::ReduceSum<double> plan;
  unsigned seed = 200;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    CAPTURE(n);
    const auto ints = random_vector<std::int32_t>(n, seed++, -1000, 1000);
    const std::vector<double> in(ints.begin(), ints.end());  // |partial sums| <= 2^26 * 1000 < 2^53
    DeviceArray<double> d_in(in);
    KILN_CHECK_SAME(reduce_three_ways(plan, d_in, n), std::vector<double>(3, static_cast<double>(cpu_sum(in).sum)));
  }
}

TEST_CASE("reduce_f64: the zero start value takes part, so -0.0 alone sums to +0.0; empty input gives +0.0") {
  PrimContext context;
  kiln::prim::ReduceSum<double> plan;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, plan.tile_items(), plan.tile_items() + 1, std::size_t{1000003}}) {
    CAPTURE(n);
    DeviceArray<double> d_in(std::vector<double>(n, -0.0));
    KILN_CHECK_SAME(reduce_three_ways(plan, d_in, n), std::vector<double>(3, +0.0));
  }
}

TEST_CASE("reduce: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::ReduceSum<double> plan;
  DeviceArray<double> d(1 << 20), out(1);
  REQUIRE(plan.temp_bytes(1 << 20) > 1);
  CHECK_THROWS_AS(plan(d.get(), out.get(), 1 << 20, kiln::prim::TempStorage{d.get(), 1}), kiln::Error);
  // One tile needs (and CUB insists on) non-null storage, though it is never touched.
  CHECK(plan.temp_bytes(1) == 1);
  CHECK_THROWS_AS(plan(d.get(), out.get(), 1, kiln::prim::TempStorage{}), kiln::Error);
}
