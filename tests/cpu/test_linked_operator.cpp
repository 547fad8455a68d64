// Operators given at run time, without a GPU: the primitives' linked rows compiled with an operator's
// text (NVRTC to LTO-IR, nvJitLink -lto, in this process), the errors a bad operator gives, the cache key
// per operator text, and a linked unit refused where no operator is given.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/prim/operator.hpp>
#include <kiln/select.hpp>

#include "base/cubin_elf.hpp"
#include "base/fatbin.hpp"
#include "fatbin_checks.hpp"  // configured_archs
#include "registry/query.hpp"  // unit_cache_key with a DiskCache
#include "jit/compiler/compile.hpp"
#include "jit/compiler/nvrtc_library.hpp"
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;

constexpr const char* kMax = "__device__ float op(float a, float b) { return a > b ? a : b; }";

std::uint32_t unit_of(const char* kernel) {
  const kiln::KernelEntry* k = kiln::prim::catalog().find(kernel);
  REQUIRE(k != nullptr);
  return k->unit;
}

// The request the JIT tier's workers get for ReduceWith<float> with `op`.
CompileRequest linked_request(const kiln::prim::Operator& op, unsigned arch) {
  CompileRequest request = kiln::detail::make_request(kiln::prim::catalog(), unit_of("linked_reduce_f32_sweep"), arch);
  const kiln::LinkedSource link = kiln::prim::linked_operator_source(op, "float", "ReduceWith<float>");
  request.link_source = link.source;
  request.link_source_name = link.name;
  return request;
}

// The request for the linked row with `kernel` and an operator called as result(args...).
CompileRequest linked_request(const char* kernel, const kiln::prim::Operator& op, const std::string& result,
                              const std::vector<std::string>& args, const std::string& plan) {
  CompileRequest request = kiln::detail::make_request(kiln::prim::catalog(), unit_of(kernel), 90);
  const kiln::LinkedSource link = kiln::prim::linked_operator_source(op, result, args, plan);
  request.link_source = link.source;
  request.link_source_name = link.name;
  return request;
}

// MergeSortPairsWith<float>'s comparator, bool(float, float).
CompileRequest linked_sort_request(const kiln::prim::Operator& compare) {
  return linked_request("linked_merge_sort_pairs_f32_block_sort", compare, "bool", {"float", "float"},
                        "MergeSortPairsWith<float>");
}

// What a caller with its own compiler hands kiln: LTO-IR (NVRTC -dlto) of a translation unit that defines
// the function the kernels call, here without kiln's header (the template declared in place).
std::string caller_lto_ir(const std::string& definition, unsigned arch) {
  const kiln::detail::Nvrtc& api = kiln::detail::nvrtc();
  const std::string source =
      "namespace kiln_prim { template <typename R, typename... A> __device__ R linked_operator(A... a); }\n" +
      definition;
  nvrtcProgram program = nullptr;
  REQUIRE(api.nvrtcCreateProgram(&program, source.c_str(), "caller.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  const std::string arch_option = "-arch=compute_" + std::to_string(arch);
  const char* options[] = {arch_option.c_str(), "-dlto", "-rdc=true"};
  const nvrtcResult compiled = api.nvrtcCompileProgram(program, 3, options);
  std::size_t size = 0;
  std::string ir;
  if (compiled == NVRTC_SUCCESS && api.nvrtcGetLTOIRSize(program, &size) == NVRTC_SUCCESS) {
    ir.resize(size);
    if (api.nvrtcGetLTOIR(program, ir.data()) != NVRTC_SUCCESS) ir.clear();
  }
  api.nvrtcDestroyProgram(&program);
  REQUIRE_FALSE(ir.empty());
  return ir;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("an operator links into the reduce row: the cubin is for the arch and defines the row's kernels") {
  const CompileRequest request = linked_request({kMax}, 90);
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  CHECK(cubin.arch == 90);
  REQUIRE(request.kernels.size() == 3);
  for (const auto& kernel : request.kernels) CHECK(cubin.defines(kernel.lowered));
  CHECK(contains(out.entry->compiler, "LTO with operator 'op' of kiln::prim::ReduceWith<float>"));
  // Only the unit's kernels and what they use: a relocatable unit keeps every global it defines unless the
  // link names the kernels (-kernels-used). Without that the cubin was 275,568 bytes and a warm plan took
  // 6-10 ms to load it on an H100; with it 81,928 (docs/DESIGN.md, "Operators at run time").
  CHECK(out.entry->cubin.size() < 150'000);
  // LTO leaves no call: the operator is inlined, so nothing of it is left to resolve (an unresolved
  // call would have failed the link).
  MESSAGE("NVRTC " << out.nvrtc_ms << " ms (unit and operator), nvJitLink -lto " << out.link_ms << " ms, cubin "
                    << out.entry->cubin.size() << " bytes");
}

TEST_CASE("a linked row's embedded LTO-IR links with the operator alone, for its arch or a newer one") {
  const kiln::Catalog& catalog = kiln::prim::catalog();
  const kiln::UnitEntry& unit = catalog.units[unit_of("linked_reduce_f32_sweep")];
  const std::vector<unsigned> archs = kiln::test::configured_archs();  // -Dprimitive_archs, ascending
  std::vector<unsigned> lto_ir;
  for (const kiln::BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == kiln::BinaryKind::ltoir) lto_ir.push_back(b.arch);
  }
  CHECK(lto_ir == archs);  // none in a build that embeds no primitives (-Dprimitive_archs=none)
  for (const unsigned arch : archs) {
    CAPTURE(arch);
    // For the GPU of that arch, and for sm_90 and the newest arch nvJitLink knows: the highest not above.
    for (const unsigned device : {arch, std::max(arch, 90u), 120u}) {
      const kiln::BinaryEntry* ir = kiln::select_lto_ir(catalog, unit, device);
      REQUIRE(ir != nullptr);
      CHECK(ir->arch <= device);
    }
  }
  if (archs.empty()) return;
  CHECK(kiln::select_lto_ir(catalog, unit, archs.front() - 1) == nullptr);  // never LTO-IR of a newer arch
  const kiln::BinaryEntry* ir = kiln::select_lto_ir(catalog, unit, 120);
  REQUIRE(ir != nullptr);
  CompileRequest request = linked_request({kMax}, 120);
  request.code_arch = ir->arch;
  auto fatbin = kiln::detail::embedded_image_fatbin(catalog, *ir);
  REQUIRE_MESSAGE(fatbin.ok(), fatbin.error());
  request.unit_lto_ir = std::move(*fatbin);
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  CHECK(cubin.arch == 120);
  for (const auto& kernel : request.kernels) CHECK(cubin.defines(kernel.lowered));
  CHECK(contains(out.entry->compiler, "the unit's embedded LTO-IR"));
  CHECK_FALSE(contains(out.log, "instead"));
  MESSAGE("lto_" << ir->arch << " for sm_120: NVRTC " << out.nvrtc_ms << " ms (the operator alone), nvJitLink -lto "
                 << out.link_ms << " ms");

  // LTO-IR whose kernels are named otherwise than the catalog says (as when nvcc spelled a type otherwise
  // than NVRTC: the kernel is not found, and the link keeps nothing of it): the unit's source is compiled.
  const kiln::UnitEntry& other = catalog.units[unit_of("linked_transform_i32_kernel")];
  const kiln::BinaryEntry* foreign = kiln::select_lto_ir(catalog, other, 120);
  REQUIRE(foreign != nullptr);
  CompileRequest transform = linked_request("linked_transform_f32_kernel", {"__device__ float op(float x) { return -x; }"},
                                            "float", {"float"}, "TransformWith<float>");
  transform.code_arch = foreign->arch;
  transform.unit_lto_ir = *kiln::detail::embedded_image_fatbin(catalog, *foreign);
  const CompileOutcome fallback = compile_unit(transform);
  const std::string fallback_why = fallback.entry.ok() ? std::string() : fallback.entry.error() + "\n" + fallback.log;
  REQUIRE_MESSAGE(fallback.entry.ok(), fallback_why);
  CHECK(contains(fallback.log, "lacks kernel"));
  CHECK(contains(fallback.log, "compiling the unit's source instead"));
  CHECK_FALSE(contains(fallback.entry->compiler, "embedded LTO-IR"));
}

TEST_CASE("a link with LTO given threads runs NVVM's optimizer and ptxas on them; nvJitLink takes both") {
  const auto count = [](const std::vector<std::string>& options, const std::string& prefix) {
    return std::count_if(options.begin(), options.end(), [&](const std::string& o) { return o.starts_with(prefix); });
  };
  using kiln::detail::nvjitlink_options;
  CompileRequest request = linked_request({kMax}, 90);
  // One thread (cores are busy): neither split; the link keeps only the row's kernels.
  CHECK(count(nvjitlink_options(request), "-split-compile=") == 0);
  CHECK(count(nvjitlink_options(request), "-Xptxas=--split-compile=") == 0);
  CHECK(count(nvjitlink_options(request), "-kernels-used=") == static_cast<std::ptrdiff_t>(request.kernels.size()));
  request.link_threads = 6;
  auto options = nvjitlink_options(request);
  CHECK(std::find(options.begin(), options.end(), "-split-compile=6") != options.end());
  CHECK(std::find(options.begin(), options.end(), "-Xptxas=--split-compile=6") != options.end());
  // Without a link source there is no LTO: PTX is assembled, and only ptxas splits.
  CompileRequest plain = request;
  plain.link_source.clear();
  options = nvjitlink_options(plain);
  CHECK(count(options, "-split-compile=") == 0);
  CHECK(count(options, "-lto") == 0);
  CHECK(std::find(options.begin(), options.end(), "-Xptxas=--split-compile=6") != options.end());

  // nvJitLink takes the option: the row's embedded LTO-IR links on every thread into a whole cubin.
  const kiln::Catalog& catalog = kiln::prim::catalog();
  const kiln::BinaryEntry* ir = kiln::select_lto_ir(catalog, catalog.units[unit_of("linked_reduce_f32_sweep")], 90);
  if (ir == nullptr) return;  // a build that embeds no primitives (-Dprimitive_archs=none)
  request.link_threads = 0;
  request.code_arch = ir->arch;
  request.unit_lto_ir = *kiln::detail::embedded_image_fatbin(catalog, *ir);
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  CHECK(contains(out.entry->compiler, "the unit's embedded LTO-IR"));
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  for (const auto& kernel : request.kernels) CHECK(cubin.defines(kernel.lowered));
}

TEST_CASE("every linked row's embedded LTO-IR links with an operator of its signature, names and all") {
  // nvcc makes the LTO-IR and NVRTC names the kernels: a type the two spell differently (std::int64_t is
  // `long` to nvcc, `long long` to NVRTC) would name a kernel the link cannot find. Only the run time's
  // link can tell (nvJitLink reads LTO-IR), so every row is linked here, as a plan would.
  const kiln::Catalog& catalog = kiln::prim::catalog();
  const std::map<std::string, std::string> spelling = {{"i32", "int"}, {"u32", "unsigned int"}, {"i64", "long long"},
                                                       {"u64", "unsigned long long"}, {"f32", "float"}, {"f64", "double"},
                                                       {"b16", "kiln_prim::bytes16"}};
  std::size_t linked = 0;
  for (std::uint32_t u = 0; u < catalog.units.size(); ++u) {
    const kiln::UnitEntry& unit = catalog.units[u];
    const kiln::BinaryEntry* ir = kiln::select_lto_ir(catalog, unit, 90);
    if (!unit.linked || ir == nullptr) continue;
    const std::string name(catalog.str(unit.name));
    CAPTURE(name);
    const std::string t = spelling.at(name.substr(name.rfind('_') + 1));
    const std::string family = name.substr(7, name.rfind('_') - 7);  // linked_<family>_<type>
    const std::string value = t == "kiln_prim::bytes16" ? ".word[0]" : "";  // what a comparison reads
    const kiln::prim::Operator binary{"__device__ " + t + " op(" + t + " a, " + t + " b) { return a; }"};
    const kiln::prim::Operator predicate2{"__device__ bool op(" + t + " a, " + t + " b) { return a" + value + " < b" +
                                          value + "; }"};
    const kiln::prim::Operator unary{"__device__ " + t + " tf(" + t + " x) { return x; }", "tf"};
    std::vector<kiln::prim::LinkedCall> calls;
    if (family == "merge_sort_pairs" || family == "unique_by_key") calls = {{predicate2, "bool", {t, t}}};
    else if (family == "select_if") calls = {{{"__device__ bool op(" + t + " x) { return x" + value + " > 0; }"}, "bool", {t}}};
    else if (family == "transform") calls = {{unary, t, {t}}};
    else if (family == "transform_reduce") calls = {{unary, t, {t}}, {binary, t, {t, t}}};
    else calls = {{binary, t, {t, t}}};
    CompileRequest request = kiln::detail::make_request(catalog, u, 90);
    const kiln::LinkedSource link = kiln::prim::linked_operators_source(calls, name);
    request.link_source = link.source;
    request.link_source_name = link.name;
    request.code_arch = ir->arch;
    request.unit_lto_ir = *kiln::detail::embedded_image_fatbin(catalog, *ir);
    const CompileOutcome out = compile_unit(request);
    const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
    REQUIRE_MESSAGE(out.entry.ok(), why);
    CHECK_MESSAGE(contains(out.entry->compiler, "the unit's embedded LTO-IR"), out.log);
    ++linked;
  }
  std::size_t with_ir = 0;
  for (const kiln::UnitEntry& unit : catalog.units) with_ir += unit.linked && catalog.binaries_of(unit).size() > 0;
  CHECK(linked == with_ir);
  MESSAGE(linked << " linked rows linked from their embedded LTO-IR");
}

TEST_CASE("LTO-IR nvJitLink refuses is replaced by the unit's source, for the same architecture") {
  // As LTO-IR of a newer toolkit than the nvJitLink loaded would be: the link still gets made.
  CompileRequest request = linked_request({kMax}, 90);
  request.code_arch = 80;
  request.unit_lto_ir = "not LTO-IR, nor anything nvJitLink reads";
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  CHECK(contains(out.log, "refused primitives.linked_reduce_f32.cu.ltoir.fatbin"));
  CHECK(contains(out.log, "compiling the unit's source instead"));
  CHECK_FALSE(contains(out.entry->compiler, "embedded LTO-IR"));
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  CHECK(cubin.arch == 90);
  for (const auto& kernel : request.kernels) CHECK(cubin.defines(kernel.lowered));
  // The operator's own errors are its, never a reason to compile the unit: an operator that does not
  // compile fails before anything is linked.
  request.link_source = kiln::prim::linked_operator_source({"__device__ float op(float a, float b) { return a +; }"},
                                                           "float", "ReduceWith<float>").source;
  const CompileOutcome bad = compile_unit(request);
  REQUIRE_FALSE(bad.entry.ok());
  CHECK_FALSE(contains(bad.log, "instead"));
}

TEST_CASE("an operator that does not compile: the error carries its text, NVRTC's log names the line") {
  const char* broken = "__device__ float op(float a, float b) { return a >> b; }";
  const CompileOutcome out = compile_unit(linked_request({broken}, 90));
  REQUIRE_FALSE(out.entry.ok());
  const std::string& error = out.entry.error();
  CHECK(contains(error, "NVRTC failed on operator 'op' of kiln::prim::ReduceWith<float>"));
  CHECK(contains(error, "primitives/linked_reduce_f32"));
  CHECK(contains(error, broken));                  // the operator's text
  CHECK(contains(out.log, "operator op"));         // its #line file name: the log points into the operator
  CHECK(contains(out.log, "error"));
}

TEST_CASE("an operator whose signature is not T(T, T): NVRTC's log names both types") {
  const CompileOutcome out =
      compile_unit(linked_request({"__device__ int op(int a, int b) { return a > b ? a : b; }"}, 90));
  REQUIRE_FALSE(out.entry.ok());
  CHECK(contains(out.log, "kiln: the operator's signature is not the one the primitive calls"));
  CHECK(contains(out.log, "Expected=float (float, float)"));
  CHECK(contains(out.log, "Given=int (int, int)"));
  // const references are the same signature
  const CompileOutcome refs = compile_unit(
      linked_request({"__device__ float op(const float& a, const float& b) { return a > b ? a : b; }"}, 90));
  CHECK_MESSAGE(refs.entry.ok(), refs.log);
}

TEST_CASE("a comparator links into the merge sort row; one that is not bool(K, K) names both signatures") {
  const CompileOutcome out =
      compile_unit(linked_sort_request({"__device__ bool op(const float& a, const float& b) { return a > b; }"}));
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  const CompileRequest request = linked_sort_request({"unused"});
  REQUIRE(request.kernels.size() == 3);  // block sort, partition, merge
  for (const auto& kernel : request.kernels) CHECK(cubin.defines(kernel.lowered));

  const CompileOutcome wrong =
      compile_unit(linked_sort_request({"__device__ float op(float a, float b) { return a - b; }"}));
  REQUIRE_FALSE(wrong.entry.ok());
  CHECK_MESSAGE(contains(wrong.log, "Expected=__nv_bool (float, float)"), wrong.log);  // NVRTC's name for bool
  CHECK(contains(wrong.log, "Given=float (float, float)"));
}

TEST_CASE("a predicate links into the select row; one that is not bool(T) names both signatures") {
  const char* kernel = "linked_select_if_f64_sweep";
  const CompileOutcome out =
      compile_unit(linked_request(kernel, {"__device__ bool op(double x) { return x > 0; }"}, "bool", {"double"},
                                  "SelectIfWith<double>"));
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  const CompileRequest request = linked_request(kernel, {"unused"}, "bool", {"double"}, "SelectIfWith<double>");
  REQUIRE(request.kernels.size() == 2);  // init, sweep
  for (const auto& k : request.kernels) CHECK(cubin.defines(k.lowered));

  const CompileOutcome wrong = compile_unit(linked_request(
      kernel, {"__device__ bool op(double x, double y) { return x > y; }"}, "bool", {"double"}, "SelectIfWith<double>"));
  REQUIRE_FALSE(wrong.entry.ok());
  CHECK(contains(wrong.log, "Expected=__nv_bool (double)"));
  CHECK(contains(wrong.log, "Given=__nv_bool (double, double)"));
}

TEST_CASE("an equality links into the unique-by-key row, a binary operator into the segmented reduce row, a unary one into the transform row") {
  struct Case {
    const char* kernel;
    const char* text;
    std::string result;
    std::vector<std::string> args;
    const char* plan;
    std::size_t kernels;
  };
  for (const Case& c : {Case{"linked_unique_by_key_i32_sweep", "__device__ bool op(int a, int b) { return a / 10 == b / 10; }",
                             "bool", {"int", "int"}, "UniqueByKeyWith<int>", 2},  // init, sweep
                        Case{"linked_segmented_reduce_f64_segments",
                             "__device__ double op(double a, double b) { return a > b ? a : b; }", "double",
                             {"double", "double"}, "SegmentedReduceWith<double>", 1},
                        Case{"linked_transform_f32_kernel", "__device__ float op(float x) { return x * x; }", "float",
                             {"float"}, "TransformWith<float>", 1}}) {
    CAPTURE(c.kernel);
    const CompileOutcome out = compile_unit(linked_request(c.kernel, {c.text}, c.result, c.args, c.plan));
    const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
    REQUIRE_MESSAGE(out.entry.ok(), why);
    const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
    REQUIRE(cubin.ok());
    const CompileRequest request = linked_request(c.kernel, {"unused"}, c.result, c.args, c.plan);
    REQUIRE(request.kernels.size() == c.kernels);
    for (const auto& k : request.kernels) CHECK(cubin.defines(k.lowered));
  }
}

TEST_CASE("two operators link into the transform-reduce row; their names must differ") {
  const char* kernel = "linked_transform_reduce_f64_sweep";
  const std::vector<kiln::prim::LinkedCall> calls{
      {{"__device__ double sq(double x) { return x * x; }", "sq"}, "double", {"double"}},
      {{"__device__ double op(double a, double b) { return a + b; }"}, "double", {"double", "double"}}};
  CompileRequest request = kiln::detail::make_request(kiln::prim::catalog(), unit_of(kernel), 90);
  const kiln::LinkedSource link = kiln::prim::linked_operators_source(calls, "TransformReduceWith<double>");
  CHECK(link.name == "operator 'sq' and operator 'op' of kiln::prim::TransformReduceWith<double>");
  request.link_source = link.source;
  request.link_source_name = link.name;
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  REQUIRE(request.kernels.size() == 3);
  for (const auto& k : request.kernels) CHECK(cubin.defines(k.lowered));
  // One translation unit: two functions of one name would collide.
  std::vector<kiln::prim::LinkedCall> same = calls;
  same[0].op.name = "op";
  CHECK_THROWS_AS(kiln::prim::linked_operators_source(same, "TransformReduceWith<double>"), kiln::Error);
}

TEST_CASE("an operator given as LTO-IR links as it is; one that does not define the call fails in nvJitLink") {
  CompileRequest request = kiln::detail::make_request(kiln::prim::catalog(), unit_of("linked_reduce_f32_sweep"), 90);
  request.link_source = caller_lto_ir(
      "template <> __device__ float kiln_prim::linked_operator<float, float, float>(float a, float b) "
      "{ return a > b ? a : b; }\n", 90);
  request.link_source_name = "LTO-IR operator 'op' of kiln::prim::ReduceWith<float>";
  request.link_lto_ir = true;
  const CompileOutcome out = compile_unit(request);
  const std::string why = out.entry.ok() ? std::string() : out.entry.error() + "\n" + out.log;
  REQUIRE_MESSAGE(out.entry.ok(), why);
  const kiln::detail::Cubin cubin = kiln::detail::read_cubin(std::string_view(out.entry->cubin));
  REQUIRE(cubin.ok());
  for (const auto& k : request.kernels) CHECK(cubin.defines(k.lowered));

  // int's function, not float's: the kernels' call stays undefined.
  request.link_source = caller_lto_ir(
      "template <> __device__ int kiln_prim::linked_operator<int, int, int>(int a, int b) { return a; }\n", 90);
  const CompileOutcome wrong = compile_unit(request);
  REQUIRE_FALSE(wrong.entry.ok());
  CHECK(contains(wrong.entry.error(), "nvJitLink"));
  MESSAGE("an LTO-IR operator that does not define the call: " << wrong.entry.error() << "\n" << wrong.log);
}

TEST_CASE("an operator's name must be an identifier, and name the function its source defines") {
  CHECK_THROWS_AS(kiln::prim::linked_operator_source({kMax, "op(1)"}, "float", "ReduceWith<float>"), kiln::Error);
  CHECK_THROWS_AS(kiln::prim::linked_operator_source({kMax, ""}, "float", "ReduceWith<float>"), kiln::Error);
  const CompileOutcome out = compile_unit(linked_request({kMax, "maximum"}, 90));
  REQUIRE_FALSE(out.entry.ok());
  CHECK(contains(out.log, "maximum"));  // "identifier "maximum" is undefined"
}

TEST_CASE("the linked cache key changes with the operator's text, and only with it") {
  const kiln::Catalog& catalog = kiln::prim::catalog();
  const kiln::UnitEntry& unit = catalog.units[unit_of("linked_reduce_f32_sweep")];
  kiln::CacheConfig config;
  config.enabled = false;  // the key only: nothing is read or written
  kiln::DiskCache cache(config);
  const auto key_of = [&](const char* text) {
    return kiln::detail::linked_cache_key(catalog, unit, 90, cache,
                                          kiln::prim::linked_operator_source({text}, "float", "ReduceWith<float>").source);
  };
  const kiln::CacheKey max = key_of(kMax);
  CHECK(max.hex == key_of(kMax).hex);
  const kiln::CacheKey min = key_of("__device__ float op(float a, float b) { return a < b ? a : b; }");
  CHECK(max.hex != min.hex);
  CHECK(max.hex != kiln::detail::unit_cache_key(catalog, unit, 90, cache).hex);
  // Linked with the embedded LTO-IR of an older arch, the code (CUB's policies) is that arch's: a key of its own.
  const auto key_80 = kiln::detail::linked_cache_key(
      catalog, unit, 90, cache, kiln::prim::linked_operator_source({kMax}, "float", "ReduceWith<float>").source, 80);
  CHECK(key_80.hex != max.hex);
  CHECK(contains(key_80.text, "\ncode=compute_80\n"));
  CHECK(contains(max.text, "\nlinked="));
  CHECK_FALSE(contains(kiln::detail::unit_cache_key(catalog, unit, 90, cache).text, "linked="));
  // The same text for another plan (another row) is another key: the unit is part of it.
  const kiln::UnitEntry& scan = catalog.units[unit_of("linked_inclusive_scan_f32_sweep")];
  CHECK(max.hex != kiln::detail::linked_cache_key(catalog, scan, 90, cache,
                                                  kiln::prim::linked_operator_source({kMax}, "float", "ReduceWith<float>").source).hex);
}

TEST_CASE("a linked unit's kernels are refused without an operator: get, warm-up and precompile say how") {
  kiln::Registry registry(kiln::prim::catalog());
  try {
    registry.get("linked_reduce_f32_sweep");
    FAIL("get() of a linked kernel without an operator did not throw");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::no_binary);
    CHECK(contains(e.what(), "linked_reduce_f32"));
    CHECK(contains(e.what(), "Registry::get(name, LinkedSource)"));
  }
  CHECK_THROWS_AS(registry.request_warmup({"linked_reduce_f32_sweep"}), kiln::Error);
  CHECK_FALSE(registry.plan("linked_reduce_f32_sweep").available);
  CHECK_THROWS_AS(kiln::precompile(kiln::prim::catalog(), 90, {"linked_reduce_f32_sweep"}, 1), kiln::Error);
  // A unit that is not linked takes no operator.
  const kiln::LinkedSource link = kiln::prim::linked_operator_source({kMax}, "float", "ReduceWith<float>");
  CHECK_THROWS_AS(registry.get("reduce_f64_sweep", link), kiln::Error);
}
