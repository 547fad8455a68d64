// Exclusive_scan_i32/i64 against a CPU prefix sum.
#include "prim_harness.hpp"

#include <kiln/prim/scan.hpp>

#include <cstdint>
#include <type_traits>

using namespace kiln::test;

namespace {

template <typename T>
std::vector<T> cpu_exclusive_sum(const std::vector<T>& in) {
  // Wrapping arithmetic, as the GPU's: signed overflow would be undefined on the CPU.
  using U = std::make_unsigned_t<T>;
  std::vector<T> out(in.size());
  U sum = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    out[i] = static_cast<T>(sum);
    sum += static_cast<U>(in[i]);
  }
  return out;
}

template <typename T>
void check_exclusive_sum() {
  PrimContext context;
  kiln::prim::ExclusiveSum<T> plan;
  check_source(plan.kernel());
  unsigned seed = 1;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<T>(n, seed++, T(-1000), T(1000));
    DeviceArray<T> d_in(in), d_out(n);
    d_out.poison();
    plan(d_in.get(), d_out.get(), n);
    KILN_CHECK_SAME(d_out.download(), cpu_exclusive_sum(in));

    // Caller-supplied storage, and the one-shot function, give the same result.
    DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
    d_out.poison();
    plan(d_in.get(), d_out.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
    KILN_CHECK_SAME(d_out.download(), cpu_exclusive_sum(in));
    d_out.poison();
    kiln::prim::exclusive_sum(d_in.get(), d_out.get(), n);
    synchronize();
    KILN_CHECK_SAME(d_out.download(), cpu_exclusive_sum(in));
  }
}

}  // namespace

TEST_CASE("exclusive_scan_i32 matches the CPU") { check_exclusive_sum<std::int32_t>(); }
TEST_CASE("exclusive_scan_i64 matches the CPU") { check_exclusive_sum<std::int64_t>(); }

TEST_CASE("exclusive_scan: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::ExclusiveSum<std::int32_t> plan;
  DeviceArray<std::int32_t> d(1 << 20);
  REQUIRE(plan.temp_bytes(1 << 20) > 1);
  CHECK_THROWS_AS(plan(d.get(), d.get(), 1 << 20, kiln::prim::TempStorage{d.get(), 1}), kiln::Error);
}
