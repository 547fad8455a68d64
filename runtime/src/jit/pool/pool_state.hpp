// The JIT pool's shared state: its queue, one slot per host thread and its worker, and the PCH families.
//
// One mutex guards it all. The dispatch (dispatch.cpp) decides which queued request a host thread takes
// next and what it does with the family's PCH; each host thread (pool.cpp) runs its requests on its
// worker process (worker_process.hpp).
#pragma once

#include "base/warn_once.hpp"
#include "jit/pool/host_pch.hpp"
#include "jit/pool/pool.hpp"
#include "jit/pool/machine_slots.hpp"
#include "jit/pool/trace.hpp"
#include "jit/pool/worker_process.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln::detail {

using Clock = std::chrono::steady_clock;

inline constexpr int kAttempts = 2;  // a request goes to at most two workers
// A started worker says hello within milliseconds; this only bounds a stuck start: the request timeout
// (KILN_JIT_TIMEOUT), at most this (hello_timeout()).
inline constexpr auto kMaxHelloTimeout = std::chrono::seconds(30);
// How long a worker may take to exit by itself before it is killed: after its output ended (so that
// its own exit status is reported), and after its input was closed at shutdown.
inline constexpr auto kExitGrace = std::chrono::milliseconds(300);
// How often a thread whose queued requests all wait (for a PCH, their batch, a worker) looks again whether
// waiting still pays. With none queued it sleeps until notified.
inline constexpr auto kRecheck = std::chrono::milliseconds(25);
// Requests that arrive together are weighed together: a request that may build its family's PCH is
// taken only once none arrived for kGather (at most kGatherMax after it came), so that the dispatch sees
// the whole batch (precompile and warm-up hand units in from many threads within milliseconds). Units
// that include nothing have no family and never wait; a CUB unit compiles for seconds.
inline constexpr auto kGather = std::chrono::milliseconds(5);
inline constexpr auto kGatherMax = std::chrono::milliseconds(50);

// What a family's PCH costs, before the family has measured its own (docs/DESIGN.md: the CUB example
// on a 16-core H100 host compiles cold in 1.8-2.3 s, builds its PCH in ~3.5 s, compiles warm in 0.36-0.62 s).
inline constexpr double kColdGuessMs = 2000;
inline constexpr double kCreateFactor = 1.6;  // building the PCH, against a cold compile
inline constexpr double kWarmFactor = 0.25;   // a warm compile, against a cold one
inline constexpr double kVerifyGuessMs = 150;  // checking a PCH file's sum
// A PCH build not done by twice its estimate plus this is not waited for any more (requests go cold).
inline constexpr double kOverdueMs = 10'000;
// The cores a critical path's unit keeps busy on average with its compilers' threads, rounded up
// (docs/DESIGN.md, "Scheduling a table": segmented_sort takes 0.68 of its one-thread time with every core's).
inline constexpr unsigned kCriticalCores = 2;

// A table's tail (docs/DESIGN.md, "Scheduling a table"): with every worker busy, a request that would
// wait at least kBeyondMinWaitMs for one and then end after every running request runs at once on a
// worker beyond the steady count, the cores then shared, while the requests in flight are at most one in
// kBeyondShare more than the workers (the 19-unit set: 17 CUB units on 16 workers, the 17th waited 1.5 s
// for a worker and ended 0.3 s after the rest). A worker's start and its compilers' loading take tens of
// milliseconds: a shorter wait does not pay for one.
inline constexpr unsigned kBeyondShare = 8;
inline constexpr double kBeyondMinWaitMs = 250;

// One host thread's worker, and what the dispatch knows of it.
struct Slot {
  Worker worker;  // used by the slot's thread only
  // Under State::mutex:
  pid_t pid = 0;     // the worker's; 0 while it has none
  bool busy = false;  // its thread is running a request
  double estimate_ms = 0;  // that request's Job::estimate()
  bool critical = false;   // that request is the critical path's unit (Pick::critical)
  Clock::time_point started;  // when its thread took that request
  bool start_ahead = false;    // set before its thread starts: start the worker before any request,
  unsigned warm_arch = 0;      // and warm it up with a compile for this architecture (0: none)
  bool done = false;           // under State::mutex: its thread has left serve() (JitPool::shutdown)
};

// What the pool knows of a PCH family.
struct Family {
  enum class Pch { unknown, absent, verifying, building, ready, unusable };
  Pch pch = Pch::unknown;
  std::filesystem::path path;
  Clock::time_point since;  // when verifying or building started
  double cold_ms = 0, warm_ms = 0, create_ms = 0;  // measured in this process; 0 while not

  double cold_estimate() const { return cold_ms > 0 ? cold_ms : kColdGuessMs; }
  double warm_estimate() const { return warm_ms > 0 ? warm_ms : kWarmFactor * cold_estimate(); }
  double ready_estimate() const {
    return pch == Pch::verifying ? kVerifyGuessMs : create_ms > 0 ? create_ms : kCreateFactor * cold_estimate();
  }
};

// A unit compiled in parts (parts.cpp): its future, and each part's outcome as it comes.
struct UnitParts;

// The cost model's answer for a unit on the critical path (parts.cpp, JitPool::State::split_cost).
struct SplitCost {
  bool pays = false;
  double whole_ms = 0;    // the unit compiled whole, with the threads the critical path's unit gets
  double longest_ms = 0;  // its longest part (0: not known)
  std::string why;        // one line, for the trace
};


struct JitPool::State {
  struct Job {
    CompileRequest request;
    std::promise<CompileOutcome> promise;  // unused by a part: its unit's is in `whole`
    PchFamily family;
    bool waited = false;      // the dispatch let it wait for its family's PCH
    Clock::time_point queued = Clock::now();
    double estimate_ms = 0;  // on one thread (compile_estimate_ms); 0: unknown
    UnitSplit split{};       // a whole unit's: whether it may be compiled in parts
    std::shared_ptr<UnitParts> whole = nullptr;  // a part's: its unit
    std::size_t part = 0;              // a part's: which
    bool split_weighed = false;        // the cost model weighed it (once: its decision is traced)
    double estimate() const { return estimate_ms > 0 ? estimate_ms : kColdGuessMs; }
    // Ends the job: its promise, or (a part) its share of its unit's, which is kept when the last part ends.
    void finish(CompileOutcome outcome);
    void finish(std::exception_ptr error);
    // "I/N": which part of its unit a part is (the trace's "part").
    std::string part_label() const;
  };
  // What a host thread takes: the job, and how it compiles.
  struct Pick {
    std::size_t index = 0;
    PchMode pch = PchMode::none;
    bool verify = false;  // check the family's PCH file first (this thread's turn to verify it)
    unsigned link_threads = 1;
    bool critical = false;  // given threads beside other requests: the critical path's unit
    bool beyond = false;    // on a worker beyond the steady count: the table's tail (kBeyondShare)
  };

  JitPoolOptions options;
  unsigned max_workers = 1;  // the steady count of workers
  unsigned cores = 1;  // options.cores, else the machine's
  bool pch_files = false;  // asked for (options, KILN_JIT_PCH); off once a worker says it cannot read them
  SplitMode split = SplitMode::cost_model;  // units on the critical path in parts (options, KILN_JIT_SPLIT)
  std::chrono::milliseconds timeout{kDefaultJitTimeout};
  std::filesystem::path worker_path;
  std::string no_worker_reason;  // when worker_path is empty: where it looked
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;
  std::condition_variable wake;  // notified on every change a waiting thread may be waiting for
  std::deque<Job> queue;
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Slot>> slots;  // slots[i] belongs to threads[i]
  std::map<std::string, Family> families;
  std::size_t idle = 0;            // threads waiting for a job
  std::size_t busy = 0;            // threads running one
  bool in_process_only = false;    // no worker can be started: every request compiles here
  bool started_one = false;        // a worker has said hello once
  Clock::time_point last_arrival;  // of a foreground request
  bool gathering = false;          // the last pick passed over a request to see its batch whole
  std::set<pid_t> live;
  JitPoolStats stats;
  WarnOnce warnings;
  PoolTrace trace;  // KILN_JIT_TRACE
  std::unique_ptr<MachineSlots> budget;  // the machine-wide compile budget: a slot per compile
  HostPchCopies pch_copies;  // the families' PCH files unpacked once here, which the workers open
  bool pch_copies_held = false;  // a copy may be kept: dropped options.pch_linger after the pool went idle
  Clock::time_point idle_since;  // when the last request ended with nothing queued

  // How long a started worker may take to say hello, or to warm up: the request timeout, at most
  // kMaxHelloTimeout (docs/DESIGN.md, "The JIT's two sides").
  std::chrono::milliseconds hello_timeout() const {
    return std::min<std::chrono::milliseconds>(timeout, kMaxHelloTimeout);
  }
  // How many more workers than max_workers may run a table's tail.
  unsigned beyond_workers() const { return max_workers / kBeyondShare; }
  void warn(std::string_view kind, const std::string& message) { warnings.warn(kind, message); }
  template <typename F>
  void count(F&& update) {
    const std::lock_guard lock(mutex);
    update(stats);
  }
  // Ends a job with a failed outcome saying `error`.
  static void fail_job(Job& job, std::string error);

  // --- Made by JitPool's constructor (pool.cpp), in order ---

  // The pool's settings: each option given in code, else its KILN_JIT_* variable, else its default.
  void read_settings();
  std::unique_ptr<MachineSlots> machine_budget();
  void find_worker();

  // --- Dispatch (dispatch.cpp; all under `mutex`) ---

  // The queued request the asking thread should run next, and how; nullopt to wait.
  std::optional<Pick> pick();
  // What one pick weighs of the running requests and the queue, and its steps (dispatch.cpp).
  struct Weighing;
  // After a request of `family` ran: what it taught the pool of the family's PCH and costs.
  void learn(const PchFamily& family, const Pick& pick, const CompileOutcome& outcome, double ms);
  void learn_family(const PchFamily& family, const Pick& pick, const CompileOutcome& outcome, double ms);
  // A verification of the family's PCH file by `pick`'s thread ended.
  void verified(const PchFamily& family, bool good);
  // Replaces queue[index], a unit, by its parts (parts.cpp); returns what they add to the load.
  double split_job(std::size_t index);
  // Whether compiling `job` in parts would end it sooner than compiling it whole, and why (parts.cpp).
  SplitCost split_cost(const Job& job) const;

  // --- One host thread per worker (pool.cpp) ---

  // It takes jobs while the pool runs, and owns its worker process.
  void serve(Slot& slot);
  // serve's steps, in order.
  void start_before_requests(Slot& slot);
  std::optional<Pick> wait_for_pick(std::unique_lock<std::mutex>& lock);
  void wait_for_work(std::unique_lock<std::mutex>& lock);
  Job take(Slot& slot, const Pick& pick);
  void verify_pch_first(const Job& job, Pick& pick);
  void ended(Slot& slot, const Job& job, const Pick& pick);
  void leave(Slot& slot);
  // Retires the slot's worker (see Worker::retire) and forgets it.
  std::string retire(Slot& slot, std::chrono::milliseconds grace);
  // Runs the job on the slot's worker (a second worker where the first dies), or in this process where no
  // worker can run; ends the job in every case.
  void run(Job& job, Slot& slot, const Pick& pick);
  // The workers that died under a job, each said, and how many of them gave no answer in time.
  struct Deaths {
    std::vector<std::string> list;
    std::size_t timeouts = 0;
  };
  // run's steps, in order.
  bool only_in_process();
  void prepare_request(Job& job, const Pick& pick);
  void retire_unfit_worker(Slot& slot, const Job& job, bool keep_aslr);
  HostPchCopies::Copy host_pch_copy(Job& job, const Slot& slot);
  bool start_for(Job& job, Slot& slot, bool keep_aslr, const Deaths& deaths);
  bool run_on_worker(Job& job, Slot& slot, const Pick& pick, const HostPchCopies::Copy& copy, Deaths& deaths,
                     int attempt);
  void stop_pch_files(CompileRequest& request);
  void trace_answer(const Job& job, const Worker& w, const Pick& pick, const HostPchCopies::Copy& copy,
                    const CompileOutcome& outcome, Clock::time_point asked, Clock::time_point start_time);
  void answered(Job& job, Worker& w, const Pick& pick, Answer& answer, Clock::time_point start_time);
  bool died(Job& job, Slot& slot, const std::string& problem, bool timed_out, Deaths& deaths, int attempt);
  std::string no_answer_within() const;
  void fail_after_deaths(Job& job, const Deaths& deaths);
  void compile_here(Job& job);
  // No worker could be started for a fresh request: compile it here. If no worker ever started, the
  // executable cannot work here, so stop trying; otherwise the failure may pass (out of processes).
  void give_up_on_workers(Job& job, const std::string& why);
  // Starts the slot's worker and hears its hello; with ASLR on where `keep_aslr` (a program's compile).
  Status start(Slot& slot, bool keep_aslr = false);
  // A slot of the machine-wide budget for one compile (a request's, a warm-up's, or one in this process):
  // waited for at most `bound`, only while the pool runs and `keep_waiting` says so, holding nothing else
  // meanwhile. A wait is counted (budget_waits); slots that cannot be used are said once, and the compile
  // goes without one. Holds none where there is no budget, or where none came free in time (missed()).
  MachineSlots::Held budget_slot(std::chrono::milliseconds bound, const std::function<bool()>& keep_waiting = {});
  // The budget binds and no slot came free within the bound: the compile goes beyond it (over_budget()),
  // or a warm-up is left out.
  bool missed(const MachineSlots::Held& held) const { return budget->on() && !held.holds() && budget->problem().empty(); }
  // Says once, and counts, that a compile runs beyond the budget.
  void over_budget();
  // Adds a slot and its thread, which serves it; adds none, and says why, when no thread can be started
  // (base/thread_start.hpp). Under `mutex`.
  Status add_slot(bool start_ahead, unsigned warm_arch = 0);
  // The slot's worker, just started, compiles a kernel of one line for `arch`; it is no longer fresh.
  void warm_up(Slot& slot, unsigned arch);
};

}  // namespace kiln::detail
