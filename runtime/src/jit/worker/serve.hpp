// The request loop of a compile worker process: what kiln-jitd runs, with the compiler injectable.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/protocol.hpp"  // kNoForkArgument

#include <chrono>
#include <functional>

namespace kiln::detail {

// A compile in its two stages (jit/compiler/compile.hpp), so that a worker can fork between them.
struct CompileStages {
  std::function<PtxStage(const CompileRequest&)> ptx;                 // NVRTC: starts no thread
  std::function<CompileOutcome(const CompileRequest&, PtxStage)> link;  // nvJitLink: may start the driver's
};
// compile_ptx_stage and link_stage.
CompileStages nvrtc_stages();

// How long a worker that forked waits, at the end of its input, for its forked children to end.
inline constexpr auto kForkedChildrenGrace = std::chrono::seconds(2);

// Says hello on `out`, then answers each request read from `in` with its stages' outcome (or, when one
// throws, a failure message carrying the exception), until `in` ends. Returns the process exit code:
// 0 at a clean end of input, 2 on a protocol or pipe error (described on stderr).
// Takes over stdout: if `out` is 1, it is moved to another descriptor and 1 points at stderr, so a
// stray print in the compiler cannot corrupt the frame stream.
//
// Forking (docs/DESIGN.md: NVRTC's precompiled headers survive fork(), and only fork()). A process may fork
// only while it runs one thread: fork() copies the calling thread alone, and another thread's locks
// would stay locked in the child. NVRTC starts no thread, but nvJitLink loads the CUDA driver, whose
// cuInit starts one that lives on. So, with `zygotes`, right after the NVRTC stage of a request whose
// PCH family (pch_family) is new to this process, while it still runs one thread, the worker forks a
// ZYGOTE: a child that holds the family's warm NVRTC state, never compiles or links, and so stays
// single-threaded. The worker keeps one end of a socket pair to it, then links and answers as usual.
//
// A fork request (when `in` is a unix socket: it names a family and brings a new input socket and
// output pipe) is forwarded, with the descriptors, to the worker's zygote of that family, which forks
// the new worker and answers forked with its pid; the worker relays that answer. With no zygote of the
// family, a worker that runs one thread forks the new worker itself; else it refuses (the answer says
// which threads run). A new worker drops its parent's channels, says hello on its own and serves it
// like any other, with everything its parent held in memory — the PCH — so its first compile is warm;
// it may make zygotes of families new to it.
//
// Reaping and lifetimes: a worker and a zygote have their children reaped by the kernel
// (SA_NOCLDWAIT). At the end of its input a worker closes its zygotes' sockets and waits up to
// kForkedChildrenGrace for its children, zygotes included; a zygote ends at the end of its socket
// (its worker closed it, or ended), after waiting as long for its own children; and the kernel kills a
// zygote whose worker ended (PR_SET_PDEATHSIG), so that none outlives its worker.
int serve_compile_requests(int in, int out, const CompileStages& stages, bool zygotes = true);

}  // namespace kiln::detail
