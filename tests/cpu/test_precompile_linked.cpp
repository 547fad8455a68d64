// A table's linked units built with code given now, without a GPU (kiln::precompile_linked, `kiln
// precompile --link`): a good operator is compiled, linked and cached; a broken one fails with NVRTC's log.
#include <kiln/cache.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <doctest/doctest.h>

#include "catalog_builder.hpp"
#include "cli_test_util.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>

namespace {

// A unit whose kernel calls op(), which only the code linked at run time defines (-rdc=true, as the
// generator gives a linked row).
constexpr const char* kUnit =
    "extern __device__ float op(float a, float b);\n"
    "extern \"C\" __global__ void lt_apply(float* x) { x[threadIdx.x] = op(x[threadIdx.x], 2.0f); }\n";
constexpr const char* kGood = "__device__ float op(float a, float b) { return a * b; }\n";
constexpr const char* kBroken = "__device__ float op(float a, float b) { return a +; }\n";

}  // namespace

// The cases run in a new process of this suite (default_cache() is configured once per process, from
// the environment; a fork would inherit a JIT pool whose threads it does not have).
TEST_CASE("precompile_linked builds a linked unit with an operator for an architecture, or says why not") {
  if (std::getenv("KILN_TEST_LINKED_CHILD") == nullptr) {
    kiln::test::TempDir tmp;
    char self[4096] = {};
    REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
    const auto child = kiln::test::run_process({self, "-tc=precompile_linked builds*"},
                                               {{"KILN_TEST_LINKED_CHILD", "1"},
                                                {"KILN_CACHE_DIR", (tmp.path() / "cache").string()},
                                                {"KILN_REMOTE_CACHE", std::nullopt}},
                                               std::chrono::seconds(240));
    CAPTURE(child.output);
    CHECK(child.status == 0);
    CHECK(kiln::test::says(child, " 1 passed | 0 failed"));  // the case ran, in the child
    return;
  }
  kiln::test::CatalogBuilder builder;
  const std::uint32_t unit = builder.linked_unit("apply", kUnit, "-rdc=true");
  builder.kernel("apply", unit, "lt_apply", "lt_apply");
  builder.unit("plain", {});
  builder.kernel("plain_kernel", 1);
  const kiln::Catalog catalog = builder.build("linktest");
  const auto good = kiln::precompile_linked(catalog, 80, {"apply"}, {"operator op", kGood});
  REQUIRE(good.size() == 1);
  CAPTURE(good[0].error.message);
  CHECK(good[0].ok);
  CHECK(good[0].compiled);
  // Asked again: the disk cache has it.
  const auto again = kiln::precompile_linked(catalog, 80, {}, {"operator op", kGood});
  REQUIRE(again.size() == 1);
  CHECK(again[0].ok);
  CHECK(again[0].cached);
  // A broken operator: not compiled, NVRTC's log and the operator's text in the error.
  const auto broken = kiln::precompile_linked(catalog, 80, {"apply"}, {"operator op", kBroken});
  REQUIRE(broken.size() == 1);
  CAPTURE(broken[0].error.message);
  CHECK_FALSE(broken[0].ok);
  CHECK_FALSE(broken[0].compiled);
  CHECK(broken[0].error.message.find("NVRTC") != std::string::npos);
  CHECK(broken[0].error.message.find("return a +;") != std::string::npos);
  // A kernel of a unit that is not linked takes no code.
  CHECK_THROWS_WITH_AS(kiln::precompile_linked(catalog, 80, {"plain_kernel"}, {"operator op", kGood}),
                       doctest::Contains("which is not linked"), kiln::Error);
}

#ifdef KILN_TEST_CLI

TEST_CASE("kiln precompile --link refuses what it cannot build, and says so") {
  kiln::test::TempDir tmp;
  const auto op = tmp.path() / "op.cu";
  kiln::test::write_bytes(op, kGood);
  // Without --arch: refused.
  CHECK(kiln::test::kiln_cli({"precompile", "--link", op.string(), "vector_add"}, tmp.path()).status == 2);
  CHECK(kiln::test::kiln_cli({"precompile", "--link", op.string(), "--record", op.string(), "--arch", "sm_80"}, tmp.path()).status == 2);
  // A kernel whose unit is not linked: it takes no code.
  const auto plain = kiln::test::kiln_cli({"precompile", "--link", op.string(), "--arch", "sm_80", "vector_add"}, tmp.path());
  CAPTURE(plain.output);
  CHECK(plain.status == 1);
  CHECK(kiln::test::says(plain, "which is not linked"));
  // A file that is not there.
  const auto missing = kiln::test::kiln_cli({"precompile", "--link", (tmp.path() / "none.cu").string(), "--arch", "sm_80"},
                                            tmp.path());
  CAPTURE(missing.output);
  CHECK(missing.status != 0);
  CHECK(kiln::test::says(missing, "none.cu"));
}

#endif
