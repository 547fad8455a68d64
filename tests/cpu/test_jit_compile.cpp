// The JIT compiler: every example unit through NVRTC + nvJitLink, with the AOT lowered names; errors; PCH.
#include <doctest/doctest.h>

#include <kiln/catalog.hpp>
#include <kiln/error.hpp>

#include "cache_test_util.hpp"
#include "base/cubin_elf.hpp"
#include "chain/entry.hpp"
#include "jit/request.hpp"
#include "jit_test_util.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;
using kiln::detail::compile_unit;

// The AOT cubin of `unit` for `arch` in the examples catalog, or empty when the build did not embed one.
std::string embedded_cubin(const kiln::UnitEntry& unit, unsigned arch) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  for (const kiln::BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == kiln::BinaryKind::cubin && b.arch == arch) return catalog.image(b);
  }
  return {};
}

// A request written here rather than taken from a catalog: unit `unit` compiled for sm_90.
CompileRequest hand_request(std::string unit) {
  CompileRequest request;
  request.registry = "test";
  request.source_name = unit + ".cu";
  request.unit = std::move(unit);
  request.arch = 90;
  return request;
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
      if (request.headers.empty()) {
        // Nothing included, nothing of CCCL's to strip: NVRTC's own cubin, no nvJitLink step.
        CHECK(out.entry->compiler.find("its own cubin") != std::string::npos);
        CHECK(out.link_ms == 0);
      } else {
        CHECK(out.entry->compiler.find("unreferenced globals stripped") != std::string::npos);
        CHECK(out.link_ms > 0);
      }
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
      if (const std::string aot = embedded_cubin(unit, arch); !aot.empty()) {
        CHECK(kiln::detail::read_cubin(aot).kernels == jit.kernels);
      }
      MESSAGE(request.unit << " sm_" << arch << ": NVRTC " << out.nvrtc_ms << " ms, nvJitLink " << out.link_ms
                           << " ms, " << out.globals_removed << " globals stripped, cubin " << out.entry->cubin.size()
                           << " bytes");
    }
  }
}

TEST_CASE("a unit that includes nothing, given threads, has NVRTC run ptxas on them for its own cubin") {
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("scale"), 90);
  REQUIRE(request.headers.empty());
  request.link_threads = 2;
  const auto options = kiln::detail::nvrtc_options(request, kiln::detail::PchMode::none, false, true);
  CHECK(std::find(options.begin(), options.end(), "-arch=sm_90") != options.end());
  CHECK(std::find(options.begin(), options.end(), "-Xptxas=--split-compile=2") != options.end());
  const CompileOutcome out = compile_unit(request);
  require_ok(out);
  CHECK(kiln::detail::read_cubin(out.entry->cubin).arch == 90);
  CHECK(out.link_ms == 0);
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
  CHECK(out.entry.error().find("-arch=sm_90") != std::string::npos);  // a unit that includes nothing: NVRTC's own cubin
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

TEST_CASE("the CUB unit's headers travel in memory: none is written, and the trivial units carry none") {
  const CompileRequest cub = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  CHECK(cub.headers.size() > 100);
  const auto named = [&](std::string_view name) {
    return std::any_of(cub.headers.begin(), cub.headers.end(), [&](const auto& h) { return h.name == name; });
  };
  CHECK(named("kiln_examples/block_sum.cuh"));  // the project's own header, by the name its #include spells
  CHECK(named("cub/block/block_reduce.cuh"));
  for (const char* unit : {"vector_add", "scale"})
    CHECK(kiln::test::example_request(kiln::test::example_unit(unit), 90).headers.empty());
}

TEST_CASE("a PCH file: created by one compile, used by the next; a missing file compiles without it") {
  kiln::test::TempDir temp;
  CompileRequest request = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  const CompileOutcome plain = compile_unit(request);
  require_ok(plain);
  CHECK(plain.pch == kiln::detail::PchResult::none);

  request.pch = kiln::detail::PchMode::create;
  request.pch_path = (temp.path() / "family.pch").string();
  const CompileOutcome created = compile_unit(request);
  require_ok(created);
  CHECK(created.entry->cubin == plain.entry->cubin);
  INFO(created.log);
  CHECK(created.pch == kiln::detail::PchResult::created);
  CHECK(std::filesystem::file_size(request.pch_path) > 1000000);

  // This process runs with ASLR on (kiln-jitd turns it off for itself): NVRTC may reject its own file
  // here, and compiles without it then. Either way the cubin is the same.
  request.pch = kiln::detail::PchMode::use;
  const CompileOutcome used = compile_unit(request);
  require_ok(used);
  CHECK(used.entry->cubin == plain.entry->cubin);
  CHECK((used.pch == kiln::detail::PchResult::used || used.pch == kiln::detail::PchResult::rejected));

  std::filesystem::remove(request.pch_path);
  const CompileOutcome missing = compile_unit(request);
  require_ok(missing);
  CHECK(missing.pch == kiln::detail::PchResult::failed);
  CHECK(missing.entry->cubin == plain.entry->cubin);
  MESSAGE("block_sum_f32 NVRTC: no PCH " << plain.nvrtc_ms << " ms; creating it " << created.nvrtc_ms << " ms; with it "
                                          << used.nvrtc_ms << " ms ("
                                          << std::string(used.pch == kiln::detail::PchResult::used ? "used" : "rejected: ASLR on")
                                          << ")");
}

TEST_CASE("a PCH that NVRTC cannot write or read: the unit compiles without it, and the log says why") {
  // NVRTC fails the whole compile when it cannot write the PCH ("error while writing PCH file: No space
  // left on device"; here, a directory that does not exist): the unit used to fail with it.
  CompileRequest request = hand_request("with_header");
  request.headers = {{"kiln_test_twice.cuh", "__device__ inline float kiln_twice(float x) { return 2.0f * x; }\n"}};
  request.source = "#include \"kiln_test_twice.cuh\"\n"
                   "extern \"C\" __global__ void kiln_pch_k(float* x) { x[0] = kiln_twice(x[0]); }\n";
  request.kernels = {{"kiln_pch_k", "kiln_pch_k"}};
  request.expressions = {"kiln_pch_k"};
  kiln::test::TempDir temp;
  request.pch_path = (temp.path() / "no-such-dir" / "family.pch").string();
  for (const auto mode : {kiln::detail::PchMode::create, kiln::detail::PchMode::use}) {
    request.pch = mode;
    const CompileOutcome out = compile_unit(request);
    require_ok(out);
    CHECK(out.pch == kiln::detail::PchResult::failed);
    CHECK(out.log.find("precompiled header") != std::string::npos);
  }
}

TEST_CASE("embedded PTX is assembled without NVRTC, and its cubin defines the kernels") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const kiln::UnitEntry& unit = kiln::test::example_unit("block_sum_f32");
  const kiln::BinaryEntry* ptx = nullptr;
  for (const kiln::BinaryEntry& b : catalog.binaries_of(unit))
    if (b.kind == kiln::BinaryKind::ptx) ptx = &b;
  if (ptx == nullptr) {
    MESSAGE("skipped: this build embeds no PTX (-Dembed_ptx=false)");
    return;
  }
  CompileRequest request = kiln::test::example_request(unit, ptx->arch);
  request.ptx = catalog.image(*ptx);
  if (const auto nul = request.ptx.find('\0'); nul != std::string::npos) request.ptx.resize(nul);
  request.source = "this is not C++: the PTX tier never compiles it";
  request.headers.clear();
  const CompileOutcome out = compile_unit(request);
  require_ok(out);
  CHECK(out.nvrtc_ms == 0);
  CHECK(out.entry->compiler.starts_with("embedded PTX + nvjitlink"));
  CHECK(kiln::detail::check_entry(*out.entry, ptx->arch).ok());
  CHECK(out.globals_removed > 0);
}

TEST_CASE("the no_compiler error code has a name") {
  CHECK(kiln::to_string(kiln::Errc::no_compiler) == "no_compiler");
}

TEST_CASE("where cores are free, a unit of several kernels runs NVRTC's optimizer on several threads") {
  CompileRequest request = hand_request("four_kernels");
  for (std::size_t k = 0; k < kiln::detail::kSplitOptimizerKernels; ++k) {
    const std::string name = "kiln_split_" + std::to_string(k);
    request.source += "extern \"C\" __global__ void " + name + "(float* x) { x[threadIdx.x] *= " +
                      std::to_string(k + 2) + ".0f; }\n";
    request.kernels.push_back({name, name});
    request.expressions.push_back(name);
  }
  const auto split = [](const std::vector<std::string>& options) {
    return std::count_if(options.begin(), options.end(), [](const std::string& o) { return o.starts_with("-split-compile="); });
  };
  using kiln::detail::nvrtc_options;
  using kiln::detail::PchMode;
  // One thread asked for (cores are busy): none.
  CHECK(split(nvrtc_options(request, PchMode::none)) == 0);
  request.link_threads = 0;
  const auto options = nvrtc_options(request, PchMode::none);
  CHECK(std::find(options.begin(), options.end(), "-split-compile=0") != options.end());
  request.link_threads = 6;
  CHECK(split(nvrtc_options(request, PchMode::none)) == 1);
  // Beside a PCH its options stay the PCH's; a smaller unit gains nothing; a linked unit's optimizer runs at the link.
  request.pch_path = "/nonexistent/kiln.pch";
  CHECK(split(nvrtc_options(request, PchMode::use)) == 0);
  CHECK(split(nvrtc_options(request, PchMode::create)) == 0);
  request.pch_path.clear();
  CompileRequest smaller = request;
  smaller.kernels.pop_back();
  smaller.expressions.pop_back();
  CHECK(split(nvrtc_options(smaller, PchMode::none)) == 0);
  CompileRequest linked = request;
  linked.link_source = "extern \"C\" __device__ float kiln_op(float x) { return x; }";
  CHECK(split(nvrtc_options(linked, PchMode::none)) == 0);

  // NVRTC takes the option, and the cubin defines every kernel (compile_unit checks that).
  request.link_threads = 0;
  const CompileOutcome out = compile_unit(request);
  require_ok(out);
  CHECK(out.entry->kernels.size() == kiln::detail::kSplitOptimizerKernels);
}

TEST_CASE("a unit that includes nothing is compiled with NVRTC's -minimal first; one that needs the CUDA runtime's declarations compiles without it, and its log keeps no trace of the first try") {
  using kiln::detail::nvrtc_options;
  using kiln::detail::PchMode;
  CompileRequest request = hand_request("needs_runtime");
  // cudaError_t is among what -minimal leaves out (NVRTC then reports it undefined).
  request.source = "extern \"C\" __global__ void kiln_needs_runtime(int* x) { cudaError_t e = cudaSuccess; x[0] = (int)e; }\n";
  request.kernels = {{"kiln_needs_runtime", "kiln_needs_runtime"}};
  request.expressions = {"kiln_needs_runtime"};
  const auto options = nvrtc_options(request, PchMode::none, true);
  CHECK(std::find(options.begin(), options.end(), "-minimal") != options.end());
  CHECK(std::find(options.begin(), options.end(), "-default-device") != options.end());
  const auto plain = nvrtc_options(request, PchMode::none);
  CHECK(std::find(plain.begin(), plain.end(), "-minimal") == plain.end());

  const CompileOutcome out = compile_unit(request);
  require_ok(out);
  CHECK(out.log.find("cudaError_t") == std::string::npos);
  CHECK(out.nvrtc_ms > 0);

  // The trivial example includes nothing: it compiles (with -minimal) to the AOT lowered name.
  const CompileOutcome trivial = compile_unit(kiln::test::example_request(kiln::test::example_unit("vector_add"), 90));
  require_ok(trivial);
  CHECK(trivial.entry->kernels.at(0).lowered == "vector_add");
}

namespace {

// The bytes of section `name` of the 64-bit ELF file `elf`, or empty (a test's reader: the files are
// NVRTC's own, just made).
std::string elf_section(const std::string& elf, const std::string& name) {
  const auto u16 = [&](std::size_t at) { std::uint16_t v; std::memcpy(&v, elf.data() + at, 2); return v; };
  const auto u32 = [&](std::size_t at) { std::uint32_t v; std::memcpy(&v, elf.data() + at, 4); return v; };
  const auto u64 = [&](std::size_t at) { std::uint64_t v; std::memcpy(&v, elf.data() + at, 8); return v; };
  if (elf.size() < 64) return {};
  const std::uint64_t shoff = u64(0x28);
  const std::uint16_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
  if (shoff + std::uint64_t{shnum} * shentsize > elf.size() || shstrndx >= shnum) return {};
  const std::uint64_t strings = u64(shoff + std::uint64_t{shstrndx} * shentsize + 0x18);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t header = shoff + std::uint64_t{i} * shentsize;
    const std::uint64_t offset = u64(header + 0x18), size = u64(header + 0x20);
    if (std::string(elf.c_str() + strings + u32(header)) == name && offset + size <= elf.size())
      return elf.substr(offset, size);
  }
  return {};
}

}  // namespace

TEST_CASE("a part of a unit's request makes only its kernels, each with the code the whole unit's compile gives it") {
  const CompileRequest whole = kiln::test::example_request(kiln::test::example_unit("scale"), 90);
  REQUIRE(whole.kernels.size() == 2);
  const CompileOutcome all = compile_unit(whole);
  require_ok(all);
  for (const std::size_t k : {std::size_t{0}, std::size_t{1}}) {
    const CompileRequest part = kiln::detail::part_request(whole, {k}).value();
    REQUIRE(part.kernels.size() == 1);
    CHECK(part.kernels[0].lowered == whole.kernels[k].lowered);
    CHECK(part.expressions[0] == whole.expressions[k]);
    CHECK(part.source == whole.source);
    const CompileOutcome out = compile_unit(part);
    require_ok(out);
    const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
    CHECK(cubin.kernels == std::vector<std::string>{whole.kernels[k].lowered});  // the other is not there
    const std::string text = ".text." + whole.kernels[k].lowered;
    const std::string code = elf_section(out.entry->cubin, text);
    CHECK(!code.empty());
    CHECK(code == elf_section(all.entry->cubin, text));
  }
  // Both, in the other order: a part's kernels are in the order it names them.
  const CompileRequest swapped = kiln::detail::part_request(whole, {1, 0}).value();
  CHECK(swapped.kernels[0].name == whole.kernels[1].name);
  CHECK(swapped.expressions[1] == whole.expressions[0]);
  // What a part may not name: test_error_paths.cpp.
}
