// Removing unreferenced module-scope .global variables from PTX, on snippets and on NVRTC's own output.
#include <doctest/doctest.h>

#include "jit_test_util.hpp"
#include "jit/compiler/ptx_strip.hpp"

#include <string>

namespace {

using kiln::detail::strip_unreferenced_globals;

constexpr std::string_view kHeader = ".version 9.0\n.target sm_90\n.address_size 64\n\n";

std::string module(std::string_view body) { return std::string(kHeader) + std::string(body); }

bool has(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("an unreferenced global goes; one a kernel loads stays") {
  const std::string ptx = module(
      ".global .align 4 .u32 unused = 5;\n"
      ".global .align 4 .b8 used[8] = {1, 0, 0, 0, 2};\n"
      ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b64 %rd<3>;\n"
      "\tmov.u64 \t%rd1, used;\n\tret;\n}\n");
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 1);
  CHECK_FALSE(has(out.ptx, "unused"));
  CHECK(has(out.ptx, ".global .align 4 .b8 used[8] = {1, 0, 0, 0, 2};\n"));
  CHECK(out.ptx == module(".global .align 4 .b8 used[8] = {1, 0, 0, 0, 2};\n"
                          ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b64 %rd<3>;\n"
                          "\tmov.u64 \t%rd1, used;\n\tret;\n}\n"));
}

TEST_CASE("removal iterates: a global mentioned only by a removed global's initialiser goes too") {
  const std::string ptx = module(
      ".global .align 4 .b8 values[8] = {1, 0, 0, 0, 2};\n"
      ".global .align 8 .u64 first = generic(values);\n"
      ".global .align 8 .u64 second = first;\n"
      ".global .align 8 .b8 table[16] = {generic(kept)+4, 0};\n"
      ".global .align 4 .u32 kept;\n"
      ".visible .entry k()\n{\n\tcvta.global.u64 %rd1, table;\n\tret;\n}\n");
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 3);
  CHECK_FALSE(has(out.ptx, "values"));
  CHECK_FALSE(has(out.ptx, "first"));
  CHECK_FALSE(has(out.ptx, "second"));
  CHECK(has(out.ptx, ".global .align 8 .b8 table[16] = {generic(kept)+4, 0};"));
  CHECK(has(out.ptx, ".global .align 4 .u32 kept;"));
}

TEST_CASE("an initialiser spanning lines is removed whole; a mention by prefix is no mention") {
  const std::string ptx = module(
      ".global .align 8 .b8 _ZN4cuda3std5tableE[24] = {1, 2, 3,\n    4, 5, 6,\n    7};\n"
      ".global .align 4 .u32 _ZN4cuda3std5table;\n"
      ".visible .entry k()\n{\n\tmov.u64 %rd1, _ZN4cuda3std5tableE_suffix;\n\tret;\n}\n");
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 2);
  CHECK(out.ptx == module(".visible .entry k()\n{\n\tmov.u64 %rd1, _ZN4cuda3std5tableE_suffix;\n\tret;\n}\n"));
}

TEST_CASE("externally visible, weak, common, extern and managed variables are kept") {
  const std::string body =
      ".visible .global .align 4 .u32 counter;\n"
      ".weak .global .align 4 .u32 weak_one = 1;\n"
      ".common .global .align 4 .u32 common_one;\n"
      ".extern .global .align 4 .u32 elsewhere;\n"
      ".global .u32 a, b;\n"  // several variables in one statement: not split, so kept
      ".global .attribute(.managed) .align 4 .u32 managed_one;\n";
  const auto out = strip_unreferenced_globals(module(body));
  CHECK(out.removed == 0);
  CHECK(out.ptx == module(body));
}

TEST_CASE("only module scope counts: function bodies, comments and line directives are kept as they are") {
  const std::string ptx = module(
      "// a comment with a brace { and a .global .u32 fake;\n"
      "/* block comment } with .global .u32 fake2; */\n"
      ".file 1 \"/src/{odd}.cu\"\n"
      ".func (.param .b32 r) helper(.param .b32 x)\n{\n\t.reg .b32 %r<2>;\n"
      "\t{ // inner scope\n\t.reg .b32 %t;\n\t}\n\tret;\n}\n"
      ".global .align 4 .u32 gone;\n"
      ".visible .entry k()\n{\n\tret;\n}\n");
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 1);
  std::string expected = ptx;
  expected.erase(expected.find(".global .align 4 .u32 gone;\n"), std::string_view(".global .align 4 .u32 gone;\n").size());
  CHECK(out.ptx == expected);
}

TEST_CASE("text whose braces do not balance is returned unchanged") {
  const std::string ptx = module(".global .u32 x;\n.visible .entry k()\n{\n\tret;\n");
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 0);
  CHECK(out.ptx == ptx);
}

TEST_CASE("NVRTC's PTX of a chained constexpr member loses the chain and keeps what the kernel loads") {
  kiln::detail::CompileRequest request;
  request.source_name = "chain.cu";
  request.source =
      "struct Table { static constexpr int values[2] = {1, 2}; static constexpr const int* first = &values[0]; };\n"
      "static __device__ int used[2] = {1, 2};\n"
      "extern \"C\" __global__ void k(int* out) { out[0] = used[threadIdx.x & 1]; }\n";
  request.options = {"-std=c++17"};
  const std::string ptx = kiln::test::nvrtc_direct(request, "-arch=compute_90").ptx;
  REQUIRE(has(ptx, "generic(_ZN5Table6valuesE)"));  // the chain this test is about is really there
  const auto out = strip_unreferenced_globals(ptx);
  CHECK(out.removed == 2);
  CHECK_FALSE(has(out.ptx, "_ZN5Table"));
  CHECK(has(out.ptx, ".global .align 4 .b8 used[8]"));
  CHECK(has(out.ptx, ".visible .entry k("));
}

TEST_CASE("NVRTC's PTX of the CUB example unit loses every constexpr global and nothing else") {
  const auto request = kiln::test::example_request(kiln::test::example_unit("block_sum_f32"), 90);
  const std::string ptx = kiln::test::nvrtc_direct(request, "-arch=compute_90").ptx;
  const auto out = strip_unreferenced_globals(ptx);
  MESSAGE("block_sum_f32 compute_90 PTX: " << ptx.size() << " -> " << out.ptx.size() << " bytes, "
                                           << out.removed << " globals removed");
  CHECK(out.removed > 100);
  CHECK(strip_unreferenced_globals(out.ptx).removed == 0);  // nothing left to find
  // NVRTC writes one global per line: the other lines are the stripped text, in order.
  std::string rest;
  for (const std::string& line : kiln::test::split_lines(ptx)) {
    if (line.rfind(".global ", 0) != 0) rest += line + "\n";
  }
  CHECK(rest == out.ptx);
}
