// The JIT tier's pool of kiln-jitd worker processes: NVRTC scales across processes, not threads.
#pragma once

#include "jit/compiler/compile.hpp"

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

struct JitPoolOptions {
  unsigned workers = 0;                 // 0: KILN_JIT_WORKERS, else the number of cores, at most 16
  std::filesystem::path worker;         // empty: find_jit_worker()
  CompileFunction in_process = compile_unit;  // runs when no worker process can be started
  // Start a PCH family's further workers by forking a worker that holds the family's precompiled
  // header (jit/pool/fork.hpp), rather than each cold. nullopt: on, unless KILN_JIT_FORK=0.
  std::optional<bool> fork;
};

struct JitPoolStats {
  std::uint64_t spawned = 0;      // worker processes started from the executable
  std::uint64_t forked = 0;       // worker processes forked from a worker that holds their family's PCH
  std::uint64_t fork_failures = 0;  // fork attempts that gave no worker (a cold one was started instead)
  std::uint64_t deaths = 0;       // workers that died (crashed, killed, broke the protocol) mid-request
  std::uint64_t retried = 0;      // requests sent to a second worker after the first died
  std::uint64_t in_process = 0;   // requests compiled in this process because no worker could be started
};

// Compiles requests on up to N worker processes, each driven by one thread of this process.
// Workers start lazily, one whenever a request waits and every started one is busy. A worker that dies
// mid-request is replaced, and the request retried once; a second death fails it (an outcome, not an
// exception) and the pool goes on. When no worker can be started, requests compile in-process, with
// one warning. Thread-safe. Destruction fails queued requests, kills busy workers, lets idle ones exit
// at the end of their input, and reaps every child; it does not wait for a compile to finish.
//
// PCH families (pch_family): the first request of a family compiles on one worker, building the PCH,
// while the family's other requests wait for it rather than each building its own; then the pool
// forks the family's further workers from that warm worker (a "zygote"), and a warm worker runs its
// families' requests first. (The worker forks them through the zygote it made for the family before its
// first link, jit/worker/serve.hpp, since linking may start a thread; the fork request names the family.)
// A forked worker is handled like any other: killed, it is replaced and its request retried. When
// forking fails, the pool warns once and starts cold workers as before.
//
// Futures rather than callbacks: the registry's single-flight shares one result among many waiters
// (std::shared_future), ensure_warm waits with a timeout (wait_for), and exceptions travel with them.
class JitPool {
 public:
  explicit JitPool(JitPoolOptions options = {});
  ~JitPool();
  JitPool(const JitPool&) = delete;
  JitPool& operator=(const JitPool&) = delete;

  // The same contract as compile_unit: a compile problem or a worker that died twice is an outcome with
  // ok=false; the future holds kiln::Error(no_compiler) when the worker could not load NVRTC.
  std::future<CompileOutcome> submit(CompileRequest request);
  CompileOutcome compile(const CompileRequest& request);  // submit(request).get()

  unsigned max_workers() const noexcept;
  bool forks_workers() const noexcept;  // asked for, and the kernel has pidfds (jit/pool/fork.hpp)
  const std::filesystem::path& worker_path() const noexcept;  // empty when none was found
  std::vector<pid_t> worker_pids() const;  // the live workers
  JitPoolStats stats() const;
  std::vector<std::string> warnings() const;  // printed to stderr, each kind once per pool

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::detail
