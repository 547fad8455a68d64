// The JIT tier's compiler: one unit, one architecture, NVRTC then nvJitLink, in this process.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"

#include <functional>
#include <string>
#include <vector>

namespace kiln::detail {

// Everything needed to compile one unit for one architecture; it travels to a worker process as is.
struct CompileRequest {
  std::string registry;
  std::string unit;
  std::string source_name;                // e.g. "examples.block_sum_f32.cu", for NVRTC's messages
  std::string source;                     // the generated translation unit, as nvcc compiled it
  std::vector<std::string> options;       // the unit's options (no -I, no -arch)
  std::vector<std::string> include_dirs;  // directories holding the unit's bundled headers, in search order
  std::vector<CachedKernel> kernels;      // registry name and the lowered name the catalog expects
  std::vector<std::string> expressions;   // the C++ name expression of each kernel, same order
  unsigned arch = 0;                      // SM number to build a cubin for
  std::string pch_dir;                    // NVRTC automatic PCH directory; empty: no PCH
};

struct CompileOutcome {
  // The cubin, its kernels, options and compiler; or one line naming the unit, the arch, the step and
  // the options that failed.
  Result<CacheEntry> entry = fail("not compiled");
  std::string log;         // NVRTC's or nvJitLink's full log (also kept when ok, if not empty)
  double nvrtc_ms = 0;
  double link_ms = 0;
  std::size_t globals_removed = 0;  // unreferenced module-scope .global variables dropped from the PTX
};

// What the NVRTC stage hands the link stage.
struct PtxStage {
  CompileOutcome outcome;  // so far: the log, nvrtc_ms, globals_removed; a failed entry when the stage failed
  std::string ptx;         // NVRTC's PTX, unreferenced module-scope globals stripped
};

// A compiler of whole units: compile_unit, or a test's fake.
using CompileFunction = std::function<CompileOutcome(const CompileRequest&)>;

// Compiles in this process. Never throws for a compile problem (that is an outcome); throws
// kiln::Error(no_compiler) when NVRTC or nvJitLink cannot be loaded. compile_unit is
// link_stage(compile_ptx_stage(...)); the stages run separately so that a worker can fork between them
// (jit/worker/serve.hpp): the NVRTC stage builds or uses the precompiled header and starts no thread, while
// nvJitLink may start the CUDA driver's (it loads libcuda for its compute cache), after which the
// process must not fork.
CompileOutcome compile_unit(const CompileRequest& request);
// The NVRTC stage: checks the request, loads NVRTC and nvJitLink (so that a missing nvJitLink costs no
// compile), NVRTC to PTX, strips the PTX.
PtxStage compile_ptx_stage(const CompileRequest& request);
// The NVRTC stage without loading nvJitLink, for a worker that may fork a zygote after it: loading
// libnvJitLink may already start the driver's threads where libcuda is installed (a GPU host), and a
// process with more than one thread must not fork. A missing nvJitLink is then noticed at the link.
PtxStage nvrtc_stage(const CompileRequest& request);
// The link stage: nvJitLink to a cubin, checked; the outcome. A failed NVRTC stage passes through.
CompileOutcome link_stage(const CompileRequest& request, PtxStage stage);

}  // namespace kiln::detail
