// Writes fuzz_jit_frame's seed corpus: one frame of each message kind, and each body alone.
#include "cache_golden_input.hpp"
#include "jit/protocol.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  using namespace kiln::detail;
  CompileRequest request;
  request.registry = "examples";
  request.unit = "block_sum_f32";
  request.source_name = "examples.block_sum_f32.cu";
  request.source = "#include <cub/block/block_reduce.cuh>\n__global__ void k() {}\n";
  request.options = {"-std=c++17", "-DCUB_DISABLE_NAMESPACE_MAGIC"};
  request.headers = {{"cub/block/block_reduce.cuh", "#pragma once\n"}};
  request.kernels = {{"block_sum_f32", "_Z13block_sum_f32PKfPfj"}};
  request.expressions = {"block_sum_f32"};
  request.arch = 90;
  request.pch = kiln::detail::PchMode::create;
  request.pch_path = "/cache/v1/0123.pch";
  request.ptx = ".version 9.0\n";
  request.link_threads = 4;
  CompileOutcome ok;
  ok.entry = kiln::test::golden_entry();
  ok.log = "remark: 831 globals stripped";
  ok.nvrtc_ms = 412.5;
  ok.link_ms = 31.25;
  ok.globals_removed = 831;
  ok.pch = kiln::detail::PchResult::created;
  CompileOutcome failed;
  failed.entry = kiln::detail::fail("examples/block_sum_f32 for sm_90: NVRTC failed");
  failed.log = "error: expected a ;";

  const std::vector<std::string> frames = {
      encode_hello({4242, 1, true}), encode_request(request), encode_outcome(ok),
      encode_outcome(failed),        encode_failure({true, 6, "nvrtc not found"}),
  };
  int n = 0;
  for (const std::string& frame : frames) {
    std::ofstream(std::string(argv[1]) + "/frame_" + std::to_string(n), std::ios::binary) << frame;
    // The body with its kind, as the fuzzer also feeds the decoders.
    const std::string body = frame.substr(kFrameHeaderSize, frame.size() - kFrameHeaderSize - kFrameTrailerSize);
    std::ofstream(std::string(argv[1]) + "/body_" + std::to_string(n++), std::ios::binary) << body;
  }
  return 0;
}
