// A table's linked units built with code given now, without a GPU (kiln::precompile_linked, `kiln
// precompile --link`): a good operator is compiled, linked and cached; a broken one fails with NVRTC's log.
#include <kiln/cache.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <doctest/doctest.h>

#include "catalog_builder.hpp"
#include "cli_test_util.hpp"

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

TEST_CASE("precompile_linked builds a linked unit with an operator for an architecture, or says why not") {
  kiln::test::TempDir tmp;
  const int status = kiln::test::run_in_child([&] {
    // In a child: default_cache() is built once per process, from the environment of its first use.
    ::setenv("KILN_CACHE_DIR", (tmp.path() / "cache").c_str(), 1);
    ::unsetenv("KILN_REMOTE_CACHE");
    kiln::test::ChildChecks checks;
    kiln::test::CatalogBuilder builder;
    const std::uint32_t unit = builder.linked_unit("apply", kUnit, "-rdc=true");
    builder.kernel("apply", unit, "lt_apply", "lt_apply");
    builder.unit("plain", {});
    builder.kernel("plain_kernel", 1);
    const kiln::Catalog catalog = builder.build("linktest");
    const auto good = kiln::precompile_linked(catalog, 80, {"apply"}, {"operator op", kGood});
    checks.expect(good.size() == 1 && good[0].ok && good[0].compiled, "a good operator is compiled and cached: " +
                                                                        (good.empty() ? "" : good[0].error));
    const auto again = kiln::precompile_linked(catalog, 80, {}, {"operator op", kGood});
    checks.expect(again.size() == 1 && again[0].ok && again[0].cached, "built again: the disk cache has it");
    const auto broken = kiln::precompile_linked(catalog, 80, {"apply"}, {"operator op", kBroken});
    checks.expect(broken.size() == 1 && !broken[0].ok && !broken[0].compiled, "a broken operator fails");
    checks.expect(!broken.empty() && broken[0].error.find("NVRTC") != std::string::npos &&
                      broken[0].error.find("return a +;") != std::string::npos,
                  "its error names NVRTC and carries the operator's text: " + (broken.empty() ? "" : broken[0].error));
    bool refused = false;
    try {
      kiln::precompile_linked(catalog, 80, {"plain_kernel"}, {"operator op", kGood});
    } catch (const kiln::Error& e) {
      refused = std::string(e.what()).find("which is not linked") != std::string::npos;
    }
    checks.expect(refused, "a kernel of a unit that is not linked is refused");
    return checks.exit_code();
  });
  CHECK(status == 0);
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
