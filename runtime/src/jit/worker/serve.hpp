// The request loop of a compile worker process: what kiln-jitd runs, with the compiler injectable.
#pragma once

#include "jit/compiler/compile.hpp"

#include <cstdint>

namespace kiln::detail {

// Says hello on `out` (saying whether this process runs with ASLR off, so that NVRTC here reads PCH
// files), then answers each request read from `in` with compile's outcome (or, when it throws, a failure
// message carrying the exception), until `in` ends. A PCH the request asks to create is written to a
// temp file and published at the request's path (jit/pch_store.hpp); one it asks to use is read from the
// host's unpacked copy where the request names one it can open, else unpacked here (jit/pch_pack.hpp).
// Returns the process exit code: 0 at a clean end of input, 2 on a protocol or pipe error (described on
// stderr).
// Takes over stdout: if `out` is 1, it is moved to another descriptor and 1 points at stderr, so a
// stray print in the compiler cannot corrupt the frame stream.
int serve_compile_requests(int in, int out, const CompileFunction& compile);

// A worker's main calls it first: the worker is killed (SIGKILL) when the host thread that started it
// ends, as it does when the host exits or is killed, and exits now when that host is gone already (its
// parent is no longer the pid kHostPidVariable names, jit/protocol.hpp). No work of a worker outlives its host.
void die_with_host();

// A worker's main calls it before it loads the compilers: the process may allocate at most
// KILN_JIT_MEMORY (jit/pool/settings.hpp; default kDefaultWorkerMemory), as RLIMIT_DATA, so that a
// program that would take the machine's memory fails alone, with a message naming the limit.
void limit_worker_memory();
// Under a sanitizer the worker maps terabytes of shadow memory before main: no limit is set there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kWorkerMemoryLimited = false;
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kWorkerMemoryLimited = false;
#  else
inline constexpr bool kWorkerMemoryLimited = true;
#  endif
#else
inline constexpr bool kWorkerMemoryLimited = true;
#endif
// The limit this worker runs under, in bytes (0: none).
std::uint64_t worker_memory_limit();

// Whether this process runs with ASLR off (personality ADDR_NO_RANDOMIZE).
bool aslr_off();

// Turns ASLR off for this process and executes it again with `argv`, as `setarch -R` does (a worker's
// main calls it first), unless KILN_JIT_PCH=0 or it is off already; where the kernel refuses, it
// returns and the process goes on with ASLR on (its hello says so).
void relaunch_without_aslr(char** argv);

}  // namespace kiln::detail
