// The fixed key and entry behind the golden entry file and the fuzzer's seeds.
#pragma once

#include <kiln/cache.hpp>

#include "fake_cubin.hpp"

#include <string>

namespace kiln::test {

inline CacheKeyFields golden_key_fields() {
  CacheKeyFields f;
  f.registry = "examples";
  f.unit = "block_sum_f32";
  f.source_digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  f.arch = 90;
  f.nvrtc = "13.0";
  f.nvjitlink = "13.0";
  f.cccl = "3.0.1";
  return f;
}

// Deterministic bytes that look a little like code: compressible, but not trivially.
inline std::string golden_code(std::size_t size) {
  std::string code(size, '\0');
  std::uint32_t x = 2463534242u;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    code[i] = static_cast<char>(i % 4 == 0 ? (x & 0xff) : (i % 7));
  }
  return code;
}

inline CacheEntry golden_entry() {
  CacheEntry e;
  e.arch = 90;
  e.kernels = {{"block_sum_f32", "_ZN13kiln_examples9block_sumIfLi256EEEvPKT_PS1_i"},
               {"block_sum_f32_tail", "_ZN13kiln_examples14block_sum_tailIfEEvPKT_PS1_i"}};
  e.options = "-std=c++17\n--use_fast_math\n-DCUB_DISABLE_NAMESPACE_MAGIC\n-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR";
  e.compiler = "nvrtc 13.0 + nvjitlink 13.0";
  e.cubin = fake_cubin(90, {e.kernels[0].lowered, e.kernels[1].lowered}, golden_code(4096));
  return e;
}

}  // namespace kiln::test
