// JIT workers forked from a worker that already holds a family's precompiled header: the host's side.
//
// NVRTC's automatic PCH lives in the memory of the process that built it and cannot be handed to another
// process, but it survives fork() (docs/DESIGN.md, "Measured facts"). So the pool builds a family's PCH in one
// worker and forks the family's further workers from it: each compiles warm from its first unit.
#pragma once

#include "jit/protocol.hpp"  // KeepWaiting

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

namespace kiln::detail {

// A worker process forked by another worker: not this process's child, so it is watched and killed
// through a pidfd (immune to pid reuse), and reaped by the worker that forked it.
struct ForkedWorker {
  pid_t pid = -1;
  int pidfd = -1;
  int to = -1;    // a unix socket: its input, non-blocking, close-on-exec
  int from = -1;  // a pipe: its output, non-blocking, close-on-exec
};

enum class ForkStatus {
  forked,        // `worker` is running and said hello
  refused,       // the zygote answered that it cannot fork: do not ask it again for this family
  failed,        // this attempt failed (no descriptors, the child died at once); the zygote is fine
  zygote_broke,  // the zygote died or broke the protocol: retire it
};

struct ForkResult {
  ForkStatus status = ForkStatus::failed;
  ForkedWorker worker;
  std::string problem;  // unless forked
};

// Asks the worker on (zygote_to, zygote_from) — idle, its input a unix socket — to fork a worker for
// `family` (through its zygote of the family, jit/worker/serve.hpp), passing the new worker's ends of a fresh
// socket and pipe; waits for its answer (while zygote_alive says so) and the child's hello (while
// keep_waiting says so, at most hello_timeout).
ForkResult fork_worker(int zygote_to, int zygote_from, std::string_view family, const KeepWaiting& zygote_alive,
                       const KeepWaiting& keep_waiting, std::chrono::milliseconds hello_timeout);

// Whether this kernel has pidfds (Linux 5.3): without them, workers are never forked.
bool forking_supported();
// True once the process has ended.
bool pidfd_ended(int pidfd);
// Waits up to `timeout` for the process to end; true if it has.
bool wait_pidfd(int pidfd, std::chrono::milliseconds timeout);
void kill_pidfd(int pidfd);

}  // namespace kiln::detail
