// The JIT tier's pool of kiln-jitd worker processes: NVRTC scales across processes, not threads.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/pool/settings.hpp"  // SplitMode

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

// How long the host keeps the PCH files it unpacked for its workers (jit/pool/host_pch.hpp) once nothing
// is queued or running: a program that asks for units one at a time replaces a worker (a PCH is read
// only by a fresh one) between units of different families, and the next would unpack again.
inline constexpr std::chrono::seconds kHostPchLinger{5};

struct JitPoolOptions {
  unsigned workers = 0;                       // 0: KILN_JIT_WORKERS, else the number of cores, at most 16
  unsigned cores = 0;                         // the cores the compiles share; 0: std::thread::hardware_concurrency()
  std::filesystem::path worker;               // empty: find_jit_worker()
  CompileFunction in_process = compile_unit;  // runs when no worker process can be started
  // How long one request may take on a worker before the worker is killed (and the request retried
  // once). 0: KILN_JIT_TIMEOUT, else kDefaultJitTimeout.
  std::chrono::milliseconds timeout{0};
  // Precompiled headers kept in files across processes (jit/pch_store.hpp). nullopt: on, unless
  // KILN_JIT_PCH=0.
  std::optional<bool> pch_files;
  // The machine-wide compile budget (jit/pool/machine_slots.hpp): the cache directory whose slots every
  // compile takes one of, shared with the other processes on it. Empty: none, this pool's workers alone.
  std::filesystem::path budget_dir;
  // How many compiles the processes on budget_dir run at once. 0: KILN_JIT_MACHINE_SLOTS, else the
  // machine's cores, and at least this pool's workers (so that a process alone never waits for a slot).
  unsigned machine_slots = 0;
  // How long the host keeps the PCH files it unpacked for its workers once nothing is queued or running.
  std::chrono::milliseconds pch_linger{kHostPchLinger};
  // Units on a table's critical path compiled in parts (submit's `split`). nullopt: KILN_JIT_SPLIT, by
  // default where the cost model says the parts end sooner (SplitMode, jit/pool/settings.hpp).
  std::optional<SplitMode> split;
};

inline constexpr std::chrono::seconds kDefaultJitTimeout{600};

// A request's PCH family (jit/pch_store.hpp) and where its PCH file lives; an empty key: none.
struct PchFamily {
  std::string key;
  std::filesystem::path path;
};

// Whether a request's unit may be compiled in parts, and what of its estimate every part pays again (the
// fixed cost and the headers' parse: compile_shared_ms), the rest shared out by kernels.
struct UnitSplit {
  bool splittable = false;  // the catalog's UnitEntry::splittable
  double shared_ms = 0;
  // Each kernel's share of the unit's code, in the request's order, summing to 1: its code's bytes in an
  // embedded cubin of another architecture (kernel_code_shares). Empty where not known: the cost model
  // then cannot tell that any part ends sooner than the whole, and never splits.
  std::vector<double> kernel_shares{};
};

// Which of a unit's `kernels` each of `count` parts compiles (indices, each part's in order): with known
// shares (UnitSplit::kernel_shares), the largest first onto the part with the least so far; otherwise
// dealt in turn.
std::vector<std::vector<std::size_t>> deal_kernels(std::size_t kernels, std::size_t count,
                                                   const std::vector<double>& shares);

struct JitPoolStats {
  std::uint64_t spawned = 0;     // worker processes started
  std::uint64_t deaths = 0;      // workers that died (crashed, killed, broke the protocol) mid-request
  std::uint64_t timeouts = 0;    // of those, killed by the pool for taking longer than the timeout
  std::uint64_t retried = 0;     // requests sent to a second worker after the first died
  std::uint64_t in_process = 0;  // requests compiled in this process because no worker could be started
  std::uint64_t pch_created = 0;   // PCH files built and published
  std::uint64_t pch_used = 0;      // compiles that used a PCH file
  std::uint64_t pch_rejected = 0;  // PCH files NVRTC refused or that failed their sum (compiled without)
  std::uint64_t pch_waits = 0;     // requests that waited for their family's PCH rather than compile cold
  std::uint64_t split_links = 0;   // requests given several threads inside the unit (cores were free)
  std::uint64_t split_critical = 0;  // of those, given them beside other requests (the table's longest)
  std::uint64_t started_ahead = 0;   // workers started before any request (start_ahead)
  std::uint64_t warmed_up = 0;       // of those, warmed up by a compile of one line
  std::uint64_t warm_ups_left_out = 0;  // of those, left out: no budget slot before a request came, or in time
  std::uint64_t beyond = 0;          // requests run on a worker beyond the steady count (a table's tail)
  std::uint64_t budget_waits = 0;    // compiles that waited for a slot of the machine-wide budget
  std::uint64_t over_budget = 0;     // compiles that ran without one: none was free within KILN_JIT_TIMEOUT
  std::uint64_t split_units = 0;     // units compiled in parts (the table's critical path)
  std::uint64_t parts = 0;           // the parts they were compiled in
};

// Compiles requests on up to N worker processes, each driven by one thread of this process.
// Workers start lazily, one whenever a request waits and every started one is busy. A worker that dies
// or outlives the timeout mid-request is replaced, and the request retried once; a second time fails it
// (an outcome, not an exception) and the pool goes on. When no worker can be started, requests compile
// in-process, with one warning. Thread-safe. Shutdown (and destruction) fails queued requests, kills busy
// workers, lets idle ones exit at the end of their input, and reaps every child; it does not wait for a
// compile. A worker also dies with its host (jit/worker/serve.hpp, die_with_host): nothing it does
// outlives the process that asked for it.
//
// Precompiled headers (docs/DESIGN.md, "PCH across processes"): a family's requests use its PCH file
// when one is in the cache. Otherwise the pool builds one (a request compiles while creating it) only
// when the family has more requests than workers free to run them at once and building it would not
// make the family end last (a table's critical path compiles cold), and a request waits for a
// PCH being built only while waiting and compiling warm would finish before compiling cold. A PCH is
// built only by a request of this process that others of its family then use: never for a later process.
//
// Queued requests run longest first (by their estimates). Where cores are free, ptxas (for a unit of two
// kernels or more) and NVRTC's optimizer (many kernels) run on several threads; so does a unit of many kernels that would
// finish last however the rest is spread over the workers, beside the others, which then leave it
// cores where they can still end before it (docs/DESIGN.md, "Scheduling a table"). With every worker
// busy, a table's tail (a request that would wait long for a worker and then end last) runs at once on
// one of up to N/8 more workers, sharing the cores.
//
// A unit whose kernels may be split (`splittable`: the catalog's flag, two kernels or more) that is on the
// critical path once its batch has arrived is compiled in parts, a request each with some of its kernels
// (part_request), queued as any other; its future then holds the parts' cubins as one entry of several
// images, or the first failed part's error and log (docs/DESIGN.md, "A unit's kernels over several
// workers").
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
  // a failed entry; the future holds kiln::Error(no_compiler) when the worker could not load NVRTC.
  // `estimate_ms`: how long the request takes on one thread (compile_estimate_ms; 0: unknown), for the
  // order in which queued requests run and which runs on several threads though others wait.
  // `split`: whether, and at what cost, the request may be compiled in parts (UnitSplit).
  std::future<CompileOutcome> submit(CompileRequest request, PchFamily family = {}, double estimate_ms = 0,
                                     UnitSplit split = {});
  CompileOutcome compile(const CompileRequest& request, PchFamily family = {}, double estimate_ms = 0,
                         UnitSplit split = {});  // submit(...).get()

  // Starts one worker now, unless the pool has started any, so that the first request finds it up and
  // its compilers loaded (~20-40 ms of a cold get otherwise: the registry asks while its context comes
  // up, when a unit will need a compile, registry/prefetch.cpp). With `warm_arch`, the worker then
  // compiles a kernel of one line for it, so that the first request's is not the process's first
  // compile (NVRTC's memory faulted in, its one-time setup done). Returns at once; a worker that cannot
  // start is the first request's to meet and report, as without it.
  void start_ahead(unsigned warm_arch = 0);

  // Stops the pool as destruction does (later requests fail at once), waiting for its threads at most
  // `bound` (nullopt: until they end); a thread still busy then, compiling in this process, is left to
  // the process's exit. For the process-wide pool at exit (jit/jit_pool.cpp). Idempotent.
  void shutdown(std::optional<std::chrono::milliseconds> bound = std::nullopt);

  unsigned max_workers() const noexcept;
  bool uses_pch_files() const noexcept;  // asked for, and the workers run with ASLR off
  const std::filesystem::path& worker_path() const noexcept;  // empty when none was found
  std::vector<pid_t> worker_pids() const;  // the live workers
  JitPoolStats stats() const;
  std::vector<std::string> warnings() const;  // printed to stderr, each kind once per pool

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kiln::detail
