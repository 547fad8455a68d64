// The JIT compiler: every example unit through NVRTC + nvJitLink, with the AOT lowered names; errors; PCH.
#include <doctest/doctest.h>

#include <kiln/error.hpp>

#include "cache_test_util.hpp"
#include "base/cubin_elf.hpp"
#include "jit_test_util.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <string>

namespace {

using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;
using kiln::detail::compile_unit;

// The AOT cubin of `unit` for `arch` in the examples catalog, or empty when the build did not embed one.
std::string_view embedded_cubin(const kiln::UnitEntry& unit, unsigned arch) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  for (const kiln::BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == kiln::BinaryKind::cubin && b.arch == arch) {
      const auto bytes = catalog.bytes(b);
      return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
    }
  }
  return {};
}

void require_ok(const CompileOutcome& out) {
  INFO("error: " << out.entry.error());
  INFO("log: " << out.log);
  REQUIRE(out.entry.ok());
}

}  // namespace

TEST_CASE("every example unit JIT-compiles for sm_90 and sm_80 into a cubin with the AOT kernels") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  for (const kiln::UnitEntry& unit : catalog.units) {
    for (const unsigned arch : {90u, 80u}) {
      const CompileRequest request = kiln::test::example_request(unit, arch);
      CAPTURE(request.unit);
      CAPTURE(arch);
      const CompileOutcome out = compile_unit(request);
      require_ok(out);
      CHECK(out.entry.error().empty());
      CHECK(out.entry->arch == arch);
      CHECK(out.entry->options == catalog.str(unit.options));
      CHECK(out.entry->compiler.rfind("nvrtc 13.", 0) == 0);
      CHECK(out.entry->compiler.find("unreferenced globals stripped") != std::string::npos);
      REQUIRE(out.entry->kernels.size() == request.kernels.size());
      for (std::size_t k = 0; k < request.kernels.size(); ++k) {
        CHECK(out.entry->kernels[k].name == request.kernels[k].name);
        CHECK(out.entry->kernels[k].lowered == request.kernels[k].lowered);
      }

      const kiln::detail::Cubin jit = kiln::detail::read_cubin(out.entry->cubin);
      REQUIRE(jit.ok());
      CHECK(jit.arch == arch);
      for (const auto& kernel : request.kernels) CHECK(jit.defines(kernel.lowered));
      // Interchangeable with the embedded binary: the same kernel entry points.
      if (const std::string_view aot = embedded_cubin(unit, arch); !aot.empty()) {
        CHECK(kiln::detail::read_cubin(aot).kernels == jit.kernels);
      }
      MESSAGE(request.unit << " sm_" << arch << ": NVRTC " << out.nvrtc_ms << " ms, nvJitLink " << out.link_ms
                           << " ms, " << out.globals_removed << " globals stripped, cubin " << out.entry->cubin.size()
                           << " bytes");
    }
  }
}

TEST_CASE("a compile error names the unit, the arch and the options, and keeps NVRTC's log") {
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("vector_add"), 90);
  request.source += "\nthis_is_not_cpp kiln_broken_line;\n";
  const CompileOutcome out = compile_unit(request);
  CHECK_FALSE(out.entry.ok());
  CHECK_FALSE(out.entry);  // no cubin
  CHECK(out.entry.error().find("examples/vector_add") != std::string::npos);
  CHECK(out.entry.error().find("sm_90") != std::string::npos);
  CHECK(out.entry.error().find("NVRTC") != std::string::npos);
  CHECK(out.entry.error().find("-arch=compute_90") != std::string::npos);
  CHECK(out.entry.error().find("-I" KILN_TEST_KERNELS_DIR "/include") != std::string::npos);
  CHECK(out.log.find("this_is_not_cpp") != std::string::npos);
  CHECK(out.log.find("error") != std::string::npos);
}

TEST_CASE("a lowered name that differs from the catalog's is an error") {
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("scale"), 90);
  REQUIRE(request.kernels.size() == 2);
  const std::string actual = request.kernels[1].lowered;
  request.kernels[1].lowered = "_Z12not_the_same";
  const CompileOutcome out = compile_unit(request);
  CHECK_FALSE(out.entry.ok());
  CHECK(out.entry.error().find("NVRTC lowers " + request.expressions[1] + " to " + actual +
                       ", the catalog recorded _Z12not_the_same") != std::string::npos);

  request.expressions.pop_back();
  const CompileOutcome mismatched = compile_unit(request);
  CHECK_FALSE(mismatched.entry.ok());
  CHECK(mismatched.entry.error().find("2 kernels but 1 name expressions") != std::string::npos);
}

TEST_CASE("an option NVRTC rejects is an error that names it") {
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("vector_add"), 90);
  request.options.push_back("--no-such-option");
  const CompileOutcome out = compile_unit(request);
  CHECK_FALSE(out.entry.ok());
  CHECK(out.entry.error().find("--no-such-option") != std::string::npos);
}

TEST_CASE("the stripped, nvJitLink-assembled CUB cubin is much smaller than NVRTC's own") {
  const CompileRequest request = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  const CompileOutcome out = compile_unit(request);
  require_ok(out);
  const std::string direct = kiln::test::nvrtc_direct(request, "-arch=sm_90").cubin;
  REQUIRE(kiln::detail::read_cubin(direct).ok());
  MESSAGE("block_sum_f32 sm_90: NVRTC's cubin " << direct.size() << " bytes; stripped PTX + nvJitLink "
                                                << out.entry->cubin.size() << " bytes (" << out.globals_removed
                                                << " unreferenced globals stripped)");
  CHECK(out.globals_removed > 100);
  CHECK(out.entry->cubin.size() * 4 < direct.size());
}

TEST_CASE("with a PCH directory, a second CUB compile in the process reuses the precompiled header") {
  kiln::test::TempDir temp;
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  const CompileOutcome plain = compile_unit(request);
  require_ok(plain);

  request.pch_dir = (temp.path() / "pch").string();
  const CompileOutcome first = compile_unit(request);
  require_ok(first);
  struct stat info {};
  REQUIRE(::stat(request.pch_dir.c_str(), &info) == 0);
  CHECK(S_ISDIR(info.st_mode));
  CHECK((info.st_mode & 0777) == 0700);
  const CompileOutcome second = compile_unit(request);
  require_ok(second);
  CHECK(second.entry->cubin == first.entry->cubin);
  // NVRTC writes the PCH to a file in -pch-dir and reads it back on the next compile. The directory is
  // this process's own under pch_dir, named by its descriptor (jit/compiler/pch_dir.hpp).
  CHECK(first.log.find("creating precompiled header file \"/proc/self/fd/") != std::string::npos);
  CHECK(second.log.find("using precompiled header file \"/proc/self/fd/") != std::string::npos);
  const auto own = kiln::test::files_in(request.pch_dir);
  REQUIRE(own.size() == 1);
  CHECK(own[0].starts_with(std::to_string(::getpid()) + "."));
  CHECK(kiln::test::files_in(std::filesystem::path(request.pch_dir) / own[0], ".pch").size() == 1);
  MESSAGE("block_sum_f32 NVRTC: no PCH " << plain.nvrtc_ms << " ms; -pch first " << first.nvrtc_ms
                                          << " ms, second " << second.nvrtc_ms << " ms");
}

TEST_CASE("the no_compiler error code has a name") {
  CHECK(kiln::to_string(kiln::Errc::no_compiler) == "no_compiler");
}
