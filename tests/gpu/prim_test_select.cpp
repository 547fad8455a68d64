// Select_i32/i64 (indices of a mask's nonzero bytes) against a CPU loop.
#include "prim_harness.hpp"

#include <kiln/prim/select.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>

using namespace kiln::test;

namespace {

enum class Mask { none, all, half, sparse };

const char* to_string(Mask m) {
  switch (m) {
    case Mask::none: return "all zero";
    case Mask::all: return "all one";
    case Mask::half: return "random 50%";
    case Mask::sparse: return "sparse (1 in 1000)";
  }
  return "?";
}

// Kept bytes are any nonzero value (random 50% uses 1..255), so "nonzero keeps" is what is tested.
std::vector<std::uint8_t> make_mask(std::size_t n, Mask kind, unsigned seed) {
  std::vector<std::uint8_t> mask(n, kind == Mask::all ? 1 : 0);
  std::mt19937_64 rng(seed);
  if (kind == Mask::half) {
    for (std::size_t i = 0; i < n; i += 8) {
      std::uint64_t bits = rng();
      for (std::size_t j = i; j < std::min(n, i + 8); ++j, bits >>= 8) {
        const std::uint8_t b = std::uint8_t(bits);
        mask[j] = (b & 1) ? std::uint8_t(b | 1) : 0;  // odd bytes: kept, with their own nonzero value
      }
    }
  } else if (kind == Mask::sparse) {
    for (std::size_t i = 0; i < n; ++i) mask[i] = rng() % 1000 == 0 ? std::uint8_t(1 + rng() % 255) : 0;
  }
  return mask;
}

template <typename I>
std::vector<I> cpu_select(const std::vector<std::uint8_t>& mask) {
  std::vector<I> out;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) out.push_back(I(i));
  }
  return out;
}

// The count, the selected prefix of out, and that nothing past it was written.
template <typename I>
void check_result(const DeviceArray<I>& d_out, const DeviceArray<I>& d_count, const std::vector<I>& want) {
  const I count = d_count.download()[0];
  REQUIRE(count == I(want.size()));
  std::vector<I> got = d_out.download();
  I poison;
  std::memset(&poison, 0xCD, sizeof poison);
  std::size_t written_past = 0;
  for (std::size_t i = want.size(); i < got.size(); ++i) written_past += got[i] != poison;
  INFO(written_past, " elements past the count were written");
  CHECK(written_past == 0);
  got.resize(want.size());
  KILN_CHECK_SAME(got, want);
}

template <typename I>
void check_select() {
  PrimContext context;
  kiln::prim::SelectIndices<I> plan;
  check_source(plan.kernel());
  unsigned seed = 1;
  for (std::size_t n : sizes_around(plan.tile_items())) {
    for (Mask kind : {Mask::none, Mask::all, Mask::half, Mask::sparse}) {
      CAPTURE(n);
      INFO("mask: ", to_string(kind));
      const auto mask = make_mask(n, kind, seed++);
      const auto want = cpu_select<I>(mask);
      DeviceArray<std::uint8_t> d_mask(mask);
      DeviceArray<I> d_out(n), d_count(1);

      d_out.poison(), d_count.poison();
      plan(d_mask.get(), d_out.get(), d_count.get(), n);
      check_result(d_out, d_count, want);

      // Caller-supplied storage, and the one-shot function, give the same result.
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      d_out.poison(), d_count.poison();
      plan(d_mask.get(), d_out.get(), d_count.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
      check_result(d_out, d_count, want);
      d_out.poison(), d_count.poison();
      kiln::prim::select_indices(d_mask.get(), d_out.get(), d_count.get(), n);
      synchronize();
      check_result(d_out, d_count, want);
    }
  }
}

}  // namespace

TEST_CASE("select_i32 matches the CPU") { check_select<std::int32_t>(); }
TEST_CASE("select_i64 matches the CPU") { check_select<std::int64_t>(); }

// More than 2^31 - 1 items: CUB's streaming path, two partitions, the count carried between them in the
// temporary storage. A sparse mask keeps the output small (2 GiB of mask, a few MiB of indices).
TEST_CASE("select_i64 across two partitions (n > 2^31 - 1) matches the CPU") {
  PrimContext context;
  kiln::prim::SelectIndices<std::int64_t> plan;
  const std::size_t n = (std::size_t{1} << 31) + 1000003;
  std::vector<std::uint8_t> mask(n, 0);
  std::mt19937_64 rng(7);
  for (std::size_t k = 0; k < (n >> 12); ++k) mask[rng() % n] = std::uint8_t(1 + rng() % 255);
  const std::size_t edge = std::size_t(std::numeric_limits<std::int32_t>::max());  // the first partition's end
  for (std::size_t i : {std::size_t{0}, edge - 2, edge - 1, edge, edge + 1, n - 1}) mask[i] = 1;
  const auto want = cpu_select<std::int64_t>(mask);
  DeviceArray<std::uint8_t> d_mask(mask);
  mask = {};
  DeviceArray<std::int64_t> d_out(want.size() + 4096), d_count(1);  // room for the count, plus a poisoned margin
  d_out.poison(), d_count.poison();
  plan(d_mask.get(), d_out.get(), d_count.get(), n);
  check_result(d_out, d_count, want);
  DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
  d_out.poison(), d_count.poison();
  plan(d_mask.get(), d_out.get(), d_count.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
  check_result(d_out, d_count, want);
}

TEST_CASE("select: more items than the index type counts is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::SelectIndices<std::int32_t> plan32;
  const std::size_t too_many = std::size_t(std::numeric_limits<std::int32_t>::max()) + 1;
  CHECK_THROWS_AS(plan32.temp_bytes(too_many), kiln::Error);
  CHECK_THROWS_AS(plan32(nullptr, nullptr, nullptr, too_many), kiln::Error);
  kiln::prim::SelectIndices<std::int64_t> plan64;
  CHECK_THROWS_AS(plan64.temp_bytes(std::size_t{1} << 32), kiln::Error);
}

TEST_CASE("select: too little caller storage is an error, not a wrong result") {
  PrimContext context;
  kiln::prim::SelectIndices<std::int32_t> plan;
  DeviceArray<std::uint8_t> mask(1 << 20);
  DeviceArray<std::int32_t> out(1 << 20), count(1);
  REQUIRE(plan.temp_bytes(1 << 20) > 1);
  CHECK_THROWS_AS(plan(mask.get(), out.get(), count.get(), 1 << 20, kiln::prim::TempStorage{out.get(), 1}),
                  kiln::Error);
}
