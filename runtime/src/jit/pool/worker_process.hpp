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

// One worker process, this process's child, and this process's ends of its pipes, both close-on-exec so
// that no other child inherits them (an inherited end would hide the worker's death from its reader).
struct Worker {
  pid_t pid = -1;
  int to = -1;    // its input
  int from = -1;  // its output
  bool pch_files = false;  // its hello said it runs with ASLR off: NVRTC there reads PCH files
  bool keeps_aslr = false; // started with ASLR on for a program's compile, though the pool reads PCH files
  unsigned requests = 0;   // answered so far
  // The PCH family whose file this worker's last request created or read: NVRTC here reads it again.
  // Any other PCH file only a fresh worker reads (docs/DESIGN.md, "PCH across processes").
  std::string reads_pch;
  // The PCH family whose unpacked file it keeps open: its last request used it (not one that created it).
  std::string holds_pch;
  bool reaped = false;     // it ended, and was reaped
  int status = 0;          // wait status, once reaped

  bool running() const noexcept { return pid > 0; }

  // Reaps the worker if it has exited; true then.
  bool exited();
  void close_input();
  // Waits up to `grace` for the worker to exit, then kills it; reaps it; closes the pipes. Returns
  // "pid N <how it ended>". Killing only after a failed WNOHANG wait means the pid is still ours.
  std::string retire(std::chrono::milliseconds grace);
};

// Starts `executable` as a worker on fresh pipes (this side non-blocking), with ASLR off when asked (so
// that it can read PCH files); otherwise with KILN_JIT_PCH=0, so that it does not turn ASLR off itself.
// Its hello is read by read_hello.
Result<Worker> spawn_worker(const std::filesystem::path& executable, bool without_aslr);

// The worker's first frame, while keep_waiting says so: a hello of this libkiln's cache format (and
// whether it reads PCH files, into worker.pch_files).
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
