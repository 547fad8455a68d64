// The JIT pool's shared state: its queue, one slot per host thread and its worker, and how they are chosen.
//
// One mutex guards it all. The dispatch (dispatch.cpp) decides which queued request a host thread takes
// next; each host thread (pool.cpp) runs its requests on its worker process (worker_process.hpp), started
// from the executable or forked from a warm one (fork.cpp).
#pragma once

#include "base/warn_once.hpp"
#include "jit/pool/pool.hpp"
#include "jit/pool/worker_process.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln::detail {

inline constexpr int kAttempts = 2;                 // a request goes to at most two workers
// A started worker says hello within milliseconds; this only bounds a stuck start.
inline constexpr auto kHelloTimeout = std::chrono::seconds(30);
// How long a worker may take to exit by itself before it is killed: after its output ended (so that
// its own exit status is reported), and after its input was closed at shutdown.
inline constexpr auto kExitGrace = std::chrono::milliseconds(300);
// How long a request waits at most for a busy worker that holds its family's PCH to fork it a worker.
// It waits only for one that compiles warm, and the pool gives such a worker no new request while
// others wait, so about one warm compile is expected; past this, a cold worker is as quick.
inline constexpr auto kForkWait = std::chrono::seconds(5);
// At shutdown, how long a worker waits for the workers forked from it to be retired first, so that none
// is left for init to adopt; they end within kExitGrace.
inline constexpr auto kChildrenWait = std::chrono::seconds(3);

// One host thread's worker, and what the dispatcher knows of it.
struct Slot {
  Worker worker;  // used by the slot's thread, or by another thread while `lent`
  // The rest under State::mutex.
  pid_t pid = 0;                // the worker's; 0 while it has none
  std::uint64_t id = 0;         // the worker's
  std::set<std::string> warm;   // the PCH families its worker holds (NVRTC keeps several)
  std::string warming;          // the family whose PCH its current request builds, if any
  std::string will_fork;        // the family of the request it took to run on a worker forked for it
  bool busy = false;            // its thread is running a request
  bool lent = false;            // another thread is forking a worker from its worker
  std::set<std::string> refused;  // the families its worker refused to fork workers for
  bool root = false;            // its worker was started from the executable, not forked
  unsigned children = 0;        // live workers forked from its worker

  bool has_worker() const noexcept { return pid > 0; }
};

struct JitPool::State {
  struct Job {
    CompileRequest request;
    std::promise<CompileOutcome> promise;
    std::string family;  // pch_family(request); empty when forking is off
  };
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

  JitPoolOptions options;
  unsigned max_workers = 1;
  bool forking = false;  // fork workers from warm ones (options, KILN_JIT_FORK, and the kernel allow it)
  std::filesystem::path worker_path;
  std::string no_worker_reason;  // when worker_path is empty: where it looked
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;
  std::condition_variable wake;  // notified on every change a waiting thread may be waiting for
  std::deque<Job> queue;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Slot>> slots;  // slots[i] belongs to threads[i]
  std::map<std::string, unsigned> fork_waiters;  // family -> threads waiting to fork a worker for it
  std::size_t idle = 0;           // threads waiting for a job
  bool in_process_only = false;   // no worker can be started: every request compiles here
  bool started_one = false;       // a worker has said hello once
  std::uint64_t next_worker_id = 1;
  std::set<pid_t> live;
  JitPoolStats stats;
  WarnOnce warnings;

  void warn(std::string_view kind, const std::string& message) { warnings.warn(kind, message); }

  template <typename F>
  void count(F&& update) {
    const std::lock_guard lock(mutex);
    update(stats);
  }

  // Ends a job with a failed outcome saying `error`.
  static void fail_job(Job& job, std::string error);

  // --- Dispatch (dispatch.cpp; all under `mutex`) ---

  // Whether `s`'s worker can fork workers that hold `family`'s PCH.
  bool can_fork_for(const Slot& s, const std::string& family) const;
  bool zygote_exists(const std::string& family, const Slot* self) const;
  // A worker started from the executable first: where linking starts a thread (the CUDA driver's), a
  // forked worker has no zygote of the family it was forked for, and refuses.
  Slot* idle_zygote(const std::string& family, const Slot* self) const;
  // Whether a worker that can fork for `family` is only forking or compiling warm, and so will be idle
  // within about one warm compile; one that builds another family's PCH is not worth waiting for.
  bool zygote_soon_idle(const std::string& family, const Slot* self) const;
  // Whether a thread other than `self` took a request of `family` to run on a worker it will fork:
  // until it asks (fork_for), a worker that holds the family must stay idle for it too.
  bool fork_coming(const std::string& family, const Slot* self) const;
  bool held_elsewhere(const std::string& family, const Slot* self) const;
  bool warming_elsewhere(const std::string& family, const Slot* self) const;
  // Whether an idle thread other than `self` would take a request of `family` now and fork a worker
  // for it: it has no worker, or one that holds neither `family` nor any family with queued requests
  // or fork waiters (it would serve those first), and that no worker was forked from (it would keep
  // that one and build the PCH itself).
  bool another_would_fork(const std::string& family, const Slot* self) const;
  // The queued request `slot`'s thread should run next, or kNone to wait. Marks the slot as warming
  // the family of a request whose PCH nobody holds or builds yet.
  std::size_t pick(Slot& slot);

  // --- One host thread per worker (pool.cpp) ---

  // It takes jobs while the pool runs, and owns its worker process.
  void serve(Slot& slot);
  // Retires the slot's worker (see Worker::retire) and forgets it.
  std::string retire(Slot& slot, std::chrono::milliseconds grace);
  void run(Job& job, Slot& slot);
  void compile_here(Job& job);
  // No worker could be started for a fresh request: compile it here. If no worker ever started, the
  // executable cannot work here, so stop trying; otherwise the failure may pass (out of processes).
  void give_up_on_workers(Job& job, const std::string& why);
  // Gives the slot a worker for a request of `family`: its own, if that one holds the family's PCH (or
  // there is no family); else one forked from a worker that holds it; else its own as it is (it builds
  // the PCH), or a new one from the executable.
  Status provide_worker(Slot& slot, const std::string& family);
  Status start(Slot& slot);

  // --- Forking (fork.cpp) ---

  // Forks a worker for the slot from an idle worker that holds `family`'s PCH, waiting for one that
  // is busy; false when there is none (or forking failed), and the slot should go on cold.
  bool fork_for(Slot& slot, const std::string& family);
};

}  // namespace kiln::detail
