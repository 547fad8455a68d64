// The JIT's compiler: one unit for one architecture, in this process — NVRTC, then nvJitLink.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"
#include "chain/unit_source.hpp"  // Header

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::detail {

// What the compile does with a precompiled header (jit/pch_store.hpp). NVRTC reads a PCH file only in a
// process with ASLR off, as kiln-jitd runs; elsewhere it is rejected and the unit compiles without.
enum class PchMode : std::uint8_t {
  none,
  create,  // build the unit's include prefix into the PCH file at `path` while compiling it
  use,     // compile against the PCH file at `path`
};

// Everything needed to compile one unit for one architecture: a unit source's fields (make_request) and
// the target; it travels to a worker process as is (jit/protocol.cpp).
struct CompileRequest {
  std::string registry;
  std::string unit;
  std::string source_name;               // e.g. "examples.block_sum_f32.cu", for NVRTC's messages
  std::string source;                    // the translation unit
  std::vector<std::string> options;      // the unit's options (no -arch)
  std::vector<Header> headers;           // what the source includes, directly or not
  std::vector<CachedKernel> kernels;     // registry name and the lowered name the catalog expects
  std::vector<std::string> expressions;  // the C++ name expression of each kernel, same order
  unsigned arch = 0;                     // SM number to build a cubin for
  PchMode pch = PchMode::none;
  std::string pch_path;
  // With `use`: the file at pch_path already unpacked by the pool's host (/proc/<host pid>/fd/<n>, a
  // sealed memory file), which the worker opens instead of unpacking pch_path itself; empty: none, or it
  // could not be made (docs/DESIGN.md, "PCH files at rest").
  std::string pch_unpacked;
  // The PTX tier: assemble this PTX (compute_N with N <= arch, embedded by nvcc) instead of compiling
  // the source: no NVRTC, no headers.
  std::string ptx;
  // Threads the compilers may use inside the unit, where cores are free: 1 for none, 0 for all. ptxas
  // always (nvJitLink -Xptxas --split-compile), NVRTC's optimizer (-split-compile) for a unit of
  // kSplitOptimizerKernels kernels or more compiled without a PCH, nvJitLink's optimizer (-split-compile)
  // where it links with LTO (a unit with a link source).
  unsigned link_threads = 1;
  // A unit linked with code given at run time (Registry::get with a LinkedSource): when not empty, the
  // unit's source and this one (which may include the unit's headers) are each compiled by NVRTC to
  // LTO-IR (-dlto, and the row's -rdc=true) and nvJitLink links them (-lto) into the cubin (docs/DESIGN.md, "Operators
  // at run time"). No PCH, no PTX.
  std::string link_source;
  std::string link_source_name;  // for NVRTC's messages, e.g. "operator op of primitives/linked_reduce_f32"
  bool link_lto_ir = false;      // link_source is LTO-IR already (LinkedSource::lto_ir): linked, not compiled
  // A linked unit's kernels as the binary embeds them (nvcc's LTO-IR for compute_<code_arch>, the fatbin
  // that holds it alone): linked as they are, so only the link source is compiled. Should nvJitLink refuse
  // them (LTO-IR of a newer toolkit than the one loaded), or the cubin lack a kernel, the unit's source is
  // compiled instead, for the same architecture.
  std::string unit_lto_ir;
  // The virtual architecture NVRTC compiles for (-arch=compute_N): 0 for `arch`. An older one for a
  // linked unit whose embedded LTO-IR is of that architecture: its operator is compiled to match, and a
  // fallback to the source keeps the code, CUB's policies included, that architecture's.
  unsigned code_arch = 0;
};

// What happened to the request's precompiled header.
enum class PchResult : std::uint8_t {
  none,      // none asked for
  created,   // written to the request's path (by NVRTC; the worker publishes it, jit/pch_store.hpp)
  used,      // NVRTC compiled against it
  rejected,  // NVRTC refused it (another NVRTC, ASLR on here, a damaged file) and compiled without
  failed,    // creation failed, or the file was missing: compiled without
};

struct CompileOutcome {
  // The cubin, its kernels, options and compiler; or one line naming the unit, the arch, the step and
  // the options that failed.
  Result<CacheEntry> entry = fail("not compiled");
  std::string log;  // NVRTC's or nvJitLink's full log (also kept when ok, if not empty)
  double nvrtc_ms = 0;
  double link_ms = 0;
  std::size_t globals_removed = 0;  // unreferenced module-scope .global variables dropped from the PTX
  PchResult pch = PchResult::none;
  // The worker's own unpacking of the request's packed PCH file (included in nvrtc_ms); 0 where it opened
  // the host's unpacked copy, or kept the one its last request read.
  double pch_unpack_ms = 0;
  // The lowered names NVRTC gave the request's kernels whose names it did not know (a program given at
  // run time), in their order: compile_unit writes them into the entry. Not sent across the protocol.
  std::vector<std::string> lowered;
};

// The fewest kernels for which NVRTC's optimizer runs on several threads: measured with bench_unit_phases
// on a 16-core H100 host, -split-compile=0 took segmented_sort's 5 kernels from 7.2 to 4.8 s
// but a unit of 2 kernels gained nothing and one of 1 lost 40 % (docs/DESIGN.md).
inline constexpr std::size_t kSplitOptimizerKernels = 4;
// The fewest kernels for which ptxas runs on several threads (it splits a unit by function): measured with
// bench_unit_phases on a 16-core H100 host, --split-compile=0 took exclusive_scan's 2 kernels to
// 0.92 of one thread and segmented_sort's 5 to 0.83, but the CUB example's 1 to 1.22; the generated
// 2,000-line unit (1 kernel) compiled with it in 1.11 of CuPy's time (bench_tiers).
inline constexpr std::size_t kSplitPtxasKernels = 2;

// NVRTC's options for `request` compiled with `pch`: the unit's own, then kiln's; with `minimal`,
// NVRTC's -minimal (tried first for a unit that includes nothing); with `cubin`, for the real
// architecture (NVRTC's own cubin, for a unit that includes nothing) rather than its PTX.
std::vector<std::string> nvrtc_options(const CompileRequest& request, PchMode pch, bool minimal = false, bool cubin = false);

// nvJitLink's options for `request`: -arch=sm_N; for a unit with a link source, LTO keeping only its
// kernels; with link_threads, ptxas's threads and, with LTO, NVVM's optimizer's (-split-compile).
std::vector<std::string> nvjitlink_options(const CompileRequest& request);

// A compiler of whole units: compile_unit, or a test's fake.
using CompileFunction = std::function<CompileOutcome(const CompileRequest&)>;

// Compiles in this process: NVRTC to PTX (or the request's PTX), the module-scope globals nothing
// references stripped, nvJitLink to a cubin, checked; a unit that includes nothing (no headers, not
// linked), NVRTC straight to its cubin, checked. Never throws for a compile problem (that is an
// outcome); throws kiln::Error(no_compiler) when NVRTC (for a source) or nvJitLink cannot be loaded.
CompileOutcome compile_unit(const CompileRequest& request);

}  // namespace kiln::detail
