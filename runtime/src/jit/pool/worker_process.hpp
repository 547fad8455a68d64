// One kiln-jitd worker process as the host sees it: started, greeted, asked for a compile, retired.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/protocol.hpp"  // KeepWaiting

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

namespace kiln::detail {

// One worker process and this process's ends of its channel (input: a unix socket, so that a fork
// request can pass descriptors; output: a pipe), both close-on-exec so that no other child inherits
// them (an inherited end would hide the worker's death from its reader). A worker started from the
// executable is this process's child; a forked one is its zygote's, and is watched through a pidfd.
struct Worker {
  pid_t pid = -1;
  int to = -1;     // its input
  int from = -1;   // its output
  int pidfd = -1;  // a forked worker's
  std::uint64_t id = 0;      // unique in the pool, unlike pids
  std::uint64_t parent = 0;  // a forked worker's: the id of the worker it was forked from
  bool reaped = false;       // it ended (and, if this process's child, was reaped)
  int status = 0;            // wait status, once reaped as this process's child

  bool running() const noexcept { return pid > 0; }
  bool forked() const noexcept { return pidfd >= 0; }

  // Reaps the worker if it has exited; true then.
  bool exited();
  void close_input();
  // Waits up to `grace` for the worker to exit, then kills it; reaps it; closes the pipes. Returns
  // "pid N <how it ended>". Killing only after a failed WNOHANG wait (or through the pidfd) means the
  // pid is still ours. A forked worker's exit status goes to its zygote; only its end is seen here.
  std::string retire(std::chrono::milliseconds grace);
};

// Starts `executable` as a worker on a fresh channel (its input a unix socket, its output a pipe; this
// side non-blocking); `forking`: it may make zygotes. Its hello is read by read_hello.
Result<Worker> spawn_worker(const std::filesystem::path& executable, bool forking);

// The worker's first frame, while keep_waiting says so: a hello of this libkiln's cache format.
Status read_hello(Worker& worker, const KeepWaiting& keep_waiting);

// What a worker said about one request: an outcome, an exception to rethrow, or nothing (it broke).
struct Answer {
  bool answered = false;
  CompileOutcome outcome;
  std::exception_ptr exception;
  std::string problem;  // when not answered
};

// Sends the request and reads the answer, while keep_waiting says so (checked on every silent poll
// interval, so that a dead worker is noticed even if its pipe stays open).
Answer exchange(Worker& worker, const CompileRequest& request, const KeepWaiting& keep_waiting);

// "unit examples/scale for sm_90": how the pool's messages name a request.
std::string describe_unit(const CompileRequest& request);

// A host thread that talks to workers blocks SIGPIPE: a write to a dead worker fails with EPIPE instead.
void block_sigpipe_in_this_thread();

}  // namespace kiln::detail
