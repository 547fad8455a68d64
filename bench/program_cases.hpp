// The programs the program benchmarks time (bench_programs, bench_program_phases; cupy_programs.py gets
// them from bench_programs --export).
#pragma once

#include <kiln/program.hpp>

#include <string>
#include <vector>

namespace kiln::bench {

struct ProgramCase {
  const char* name;
  kiln::ProgramSource source;
};

// A trivial kernel padded to 10 KB with comments (what hashing by content costs is per byte), and a CUB one.
inline std::vector<ProgramCase> program_cases() {
  std::string padding;
  while (padding.size() < 10 * 1024) padding += "// padding: a program of about ten kilobytes, as the target names\n";
  kiln::ProgramSource trivial;
  trivial.label = "bench/trivial_10k";
  trivial.source = padding + "extern \"C\" __global__ void scale(float* x, float a, int n) {\n"
                             "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n";
  trivial.name_expressions = {"scale"};
  kiln::ProgramSource cub;
  cub.label = "bench/cub_block_sum";
  cub.source = "#include <cub/block/block_reduce.cuh>\n"
               "template <int Threads> __global__ void block_sum(const float* in, float* out) {\n"
               "  using Reduce = cub::BlockReduce<float, Threads>;\n"
               "  __shared__ typename Reduce::TempStorage storage;\n"
               "  const float s = Reduce(storage).Sum(in[blockIdx.x * Threads + threadIdx.x]);\n"
               "  if (threadIdx.x == 0) out[blockIdx.x] = s;\n}\n";
  cub.options = {"-std=c++17"};
  cub.name_expressions = {"block_sum<256>"};
  return {{"trivial, 10 KB", trivial}, {"CUB block reduce", cub}};
}

}  // namespace kiln::bench
