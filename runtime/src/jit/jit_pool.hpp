// The process-wide pool of kiln-jitd workers that the JIT and PTX tiers compile on.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/pool/pool.hpp"  // JitPoolStats, PchFamily

#include <kiln/cache.hpp>

namespace kiln::detail {

// Compiles on the process-wide pool of kiln-jitd workers (started on first use, sized by
// KILN_JIT_WORKERS), or in this process when no worker can be started.
// `estimate_ms`: compile_estimate_ms's (jit/request.hpp), for the pool's order and threads (0: unknown);
// `split`: whether the unit may be compiled in parts (JitPool::submit).
CompileOutcome jit_compile(const CompileRequest& request, PchFamily family = {}, double estimate_ms = 0,
                           UnitSplit split = {});

// jit_compile's entry, or Error(compile) carrying the outcome's error line and the compiler's full log.
CacheEntry jit_compile_entry(const CompileRequest& request, PchFamily family = {}, double estimate_ms = 0,
                             UnitSplit split = {});

// Starts the pool's first worker for `arch` ahead of its first request (its compilers loaded meanwhile).
void start_jit_workers(unsigned arch);

// How many compiles the pool runs at once.
unsigned jit_parallelism();

// How many requests warm-up and precompile hand the pool at once (each waits on a thread of its own):
// all of a registry's units, up to this. The pool runs jit_parallelism() of them and orders the rest.
inline constexpr unsigned kMaxJitRequestsInFlight = 256;

// What the process-wide pool has done so far (for the benchmarks and `kiln status`).
JitPoolStats jit_pool_stats();

}  // namespace kiln::detail
