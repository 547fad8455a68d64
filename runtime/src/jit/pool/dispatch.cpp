// Which queued request a host thread of the JIT pool takes next, and what it does with its family's PCH.
//
// The rule (docs/DESIGN.md, "PCH across processes"): never leave a core idle for a PCH when compiling
// without one would finish sooner. A family's PCH is built (by a request compiling while it creates it)
// when the family has more requests than the pool can run at once, or when the pool has more requests
// than it can run at once and the family more than one (then every core is busy anyway, and a PCH cuts
// the work), in either case only where building it would not make the family end last, and never for a
// family of one request (a PCH is built only where this process uses it). A request
// waits for a PCH being built while waiting plus a warm compile is expected to end before a cold compile
// would, or while a request that needs no PCH can take its core instead. A request that may build a PCH
// is decided on once its batch has arrived (kGather, pool_state.hpp).
//
// Scheduling a table (docs/DESIGN.md): queued requests are taken longest first, by their estimates; a
// unit whose compile alone outlasts its share of everything queued and running (it would end last
// however the rest were spread) goes at once and compiles cold rather than build or wait for a PCH that
// does not pay for it; such a unit of many kernels also runs on every core's thread beside the others,
// which then leave it kCriticalCores cores where they can still end before it. With every worker busy, a
// table's tail runs beyond them (kBeyondShare, pool_state.hpp). A unit on the critical path whose kernels
// may be split goes as parts instead where the cost model says the parts end sooner (parts.cpp).
#include "jit/pool/pool_state.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <thread>

namespace kiln::detail {

namespace {

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// A running mean that follows the last few measurements.
void update(double& mean, double sample) { mean = mean > 0 ? 0.5 * mean + 0.5 * sample : sample; }

// Why a compile could not build or use its PCH: the first line of its log that speaks of one.
std::string pch_problem(const std::string& log) {
  std::size_t start = 0;
  while (start < log.size()) {
    const std::size_t end = std::min(log.find('\n', start), log.size());
    const std::string line = log.substr(start, end - start);
    if ((line.find("PCH") != std::string::npos || line.find("precompiled header") != std::string::npos) &&
        !line.starts_with("kiln: compiled again"))
      return line;
    start = end + 1;
  }
  return "the compiler's log says no more";
}

}  // namespace

// What one pick weighs, measured once: the workers' running requests and the queue, and the questions the
// rules above ask of them, each a member below.
struct JitPool::State::Weighing {
  State& s;
  const Clock::time_point now;
  unsigned capacity = 0;          // workers of the steady count not busy
  std::ptrdiff_t foreground = 0;  // requests queued
  // What the workers have to do, queued and running, on one thread each; of the running, the critical
  // path's units (the longest one's time left) and the others.
  unsigned critical_running = 0, others_running = 0;
  double load = 0, critical_ms = 0, others_ms = 0;
  // When the first running request is expected to end, and the last (their estimates less the time run).
  double earliest_end = std::numeric_limits<double>::infinity(), latest_end = 0;
  bool hold_others = false;  // the others leave the running critical units their cores
  bool beyond = false;       // every worker is busy: a request taken runs beyond the steady count
  bool tail = false;         // and the queue is a table's tail, which may run there

  Weighing(State& state, Clock::time_point at);

  // --- The steps of a pick ---
  void split_units_on_critical_path();
  void weigh_others();
  std::vector<std::size_t> longest_first() const;
  std::optional<Pick> consider(std::size_t index);

  // --- The questions ---
  bool on_critical_path(const Job& job) const;
  bool batch_arriving(const Job& job) const;
  bool splits(Job& job);
  bool critical(const Job& job) const;
  unsigned threads_for(const Job& job) const;
  bool other_work(const std::string& key) const;
  bool would_end_last_waiting(const Job& job) const;
  bool builds_pch(const Job& job) const;

  // --- What a request does with its family's PCH ---
  std::optional<Pick> with_pch(Job& job, Pick pick);
  bool found_pch_file(Family& f, const std::filesystem::path& path);
  bool waits_for_pch(Job& job, const Family& f) const;
  std::optional<Pick> build_or_gather(const Job& job, Family& f, Pick pick);
};

std::optional<JitPool::State::Pick> JitPool::State::pick() {
  gathering = false;
  Weighing w(*this, Clock::now());
  w.split_units_on_critical_path();
  w.weigh_others();
  for (const std::size_t i : w.longest_first())
    if (std::optional<Pick> pick = w.consider(i)) return pick;
  return std::nullopt;
}

// The running requests' ends and loads, and the queued requests' load.
JitPool::State::Weighing::Weighing(State& state, Clock::time_point at) : s(state), now(at) {
  capacity = s.max_workers > s.busy ? static_cast<unsigned>(s.max_workers - s.busy) : 0;
  foreground = static_cast<std::ptrdiff_t>(s.queue.size());
  for (const auto& slot : s.slots) {
    if (!slot->busy) continue;
    const double left = std::max(0.0, slot->estimate_ms - ms_between(slot->started, now));
    earliest_end = std::min(earliest_end, left);
    latest_end = std::max(latest_end, left);
    load += slot->estimate_ms;
    if (slot->critical) {
      ++critical_running;
      critical_ms = std::max(critical_ms, slot->estimate_ms - ms_between(slot->started, now));
    } else {
      ++others_running;
      others_ms += slot->estimate_ms;
    }
  }
  for (const Job& j : s.queue) load += j.estimate();
}

// A unit on the critical path that splits goes as its parts, each a request of its own at the queue's end,
// once its batch has arrived.
void JitPool::State::Weighing::split_units_on_critical_path() {
  for (std::size_t i = 0; i < s.queue.size();) {
    if (!splits(s.queue[i])) {
      ++i;
    } else if (batch_arriving(s.queue[i])) {
      s.gathering = true;
      ++i;
    } else {
      load += s.split_job(i);  // queue[i] is now the next job; its parts are at the end
    }
  }
  foreground = static_cast<std::ptrdiff_t>(s.queue.size());
}

// While critical units run, the others leave them their cores (kCriticalCores each), as long as the
// others' work still ends before the longest critical unit would: otherwise they slow it down. With every
// worker busy, a thread runs one beyond the steady count only for a table's tail (a few requests in flight
// more than the workers) that would wait long for a worker (pool_state.hpp, kBeyondShare).
void JitPool::State::Weighing::weigh_others() {
  for (const Job& j : s.queue)
    if (!critical(j)) others_ms += j.estimate();
  const unsigned kept = critical_running * kCriticalCores;
  const unsigned others_allowed = s.cores > kept ? s.cores - kept : 0;
  hold_others = critical_running > 0 && others_allowed > 0 && others_running >= others_allowed &&
                others_ms / others_allowed < critical_ms;
  beyond = s.busy >= s.max_workers;
  tail = beyond && static_cast<std::size_t>(foreground) + s.busy <= s.max_workers + s.beyond_workers() &&
         earliest_end >= kBeyondMinWaitMs;
}

// Longest first; unknown estimates (0) keep their places after the rest.
std::vector<std::size_t> JitPool::State::Weighing::longest_first() const {
  std::vector<std::size_t> order(s.queue.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return s.queue[a].estimate_ms > s.queue[b].estimate_ms; });
  return order;
}

// queue[index], taken now and how; nullopt: it waits (for its batch, a worker, a PCH, the critical units).
std::optional<JitPool::State::Pick> JitPool::State::Weighing::consider(std::size_t index) {
  Job& job = s.queue[index];
  if (splits(job)) return std::nullopt;  // its batch still arriving
  if (beyond && (!tail || !would_end_last_waiting(job))) return std::nullopt;
  Pick pick{index, PchMode::none, false, threads_for(job)};
  pick.beyond = beyond;
  pick.critical = pick.link_threads != 1 && foreground > 1;
  if (hold_others && !pick.critical) return std::nullopt;
  if (!s.pch_files || job.family.key.empty() || s.in_process_only) return pick;
  return with_pch(job, pick);
}

// The table's critical path: a unit whose compile alone outlasts the load's share of one worker, which no
// spreading of the rest can hide. It goes as soon as a worker is free (its batch is not gathered), never
// builds its family's PCH (a compile that builds one takes kCreateFactor as long, and the family's others
// would wait behind it) and waits for one only where waiting alone pays.
bool JitPool::State::Weighing::on_critical_path(const Job& job) const { return job.estimate_ms * s.max_workers > load; }

// Requests are still arriving with this one's (kGather, at most kGatherMax after it came).
bool JitPool::State::Weighing::batch_arriving(const Job& job) const {
  return now - s.last_arrival < kGather && now - job.queued < kGatherMax;
}

// A unit on the critical path whose kernels may be split goes as parts, each a request of its own
// (parts.cpp), once its batch has arrived (the load is then the table's); until then no thread takes it
// whole. Not where every compile runs in this process: NVRTC runs one at a time there, and parts only add
// work. With the cost model (the default), only where the parts would end clearly sooner than the unit
// whole (split_cost, parts.cpp); its decision is traced once per unit.
bool JitPool::State::Weighing::splits(Job& job) {
  if (s.split == SplitMode::off || s.in_process_only || !job.split.splittable || job.request.kernels.size() < 2 ||
      !job.request.link_source.empty() || !job.request.ptx.empty() || job.whole || !on_critical_path(job))
    return false;
  if (s.split == SplitMode::always) return true;
  const SplitCost cost = s.split_cost(job);
  if (!job.split_weighed) {
    job.split_weighed = true;
    s.trace.split(job.request.registry + "/" + job.request.unit, job.request.arch, cost.pays, cost.why, job.estimate(),
                  cost.longest_ms);
  }
  return cost.pays;
}

// A unit on the critical path that threads shorten (kSplitOptimizerKernels; not a linked unit) runs on
// every core's.
bool JitPool::State::Weighing::critical(const Job& job) const {
  return on_critical_path(job) && s.cores > 1 && job.request.kernels.size() >= kSplitOptimizerKernels &&
         job.request.link_source.empty();
}

// Where no other request will need the cores, the compilers may use them for this one; beside others, the
// critical path's unit may (docs/DESIGN.md, "Threads inside a unit", "Scheduling a table").
unsigned JitPool::State::Weighing::threads_for(const Job& job) const {
  if (job.request.kernels.size() < kSplitPtxasKernels) return 1;  // nothing to split
  if (foreground <= 1 && capacity > 1) return std::min(capacity, s.cores);
  return critical(job) ? s.cores : 1;
}

// Whether a foreground request of another family than `key` would be taken at once (it waits for no PCH).
bool JitPool::State::Weighing::other_work(const std::string& key) const {
  return std::any_of(s.queue.begin(), s.queue.end(), [&](const Job& j) {
    if (j.family.key == key) return false;
    if (j.family.key.empty()) return true;
    const auto it = s.families.find(j.family.key);
    return it == s.families.end() || (it->second.pch != Family::Pch::building && it->second.pch != Family::Pch::verifying);
  });
}

// Taken beyond the steady count, it would end after every running request even had it waited for a worker.
bool JitPool::State::Weighing::would_end_last_waiting(const Job& job) const {
  return earliest_end + job.estimate() > latest_end;
}

// More of the family than can run at once, or more requests than can run at once and more than one of the
// family: build it (so only where this process uses it), where the family would not then end last:
// building it and compiling the others warm after it takes kCreateFactor + kWarmFactor of a cold compile,
// while cold they run side by side (the 200-unit registry's two CUB units ended 0.9 s after the rest that
// way; the 19-unit set was faster without PCH files too: bench/RESULTS.md). Never by the critical path's
// unit, which that would lengthen.
bool JitPool::State::Weighing::builds_pch(const Job& job) const {
  const auto of_family = std::count_if(s.queue.begin(), s.queue.end(),
                                       [&](const Job& j) { return j.family.key == job.family.key; });
  const bool would_end_last = job.estimate_ms * (kCreateFactor + kWarmFactor) * s.max_workers > load;
  const bool saturated = static_cast<unsigned>(foreground) > capacity && of_family > 1;
  return !would_end_last && of_family > 1 && (static_cast<unsigned>(of_family) > capacity || saturated);
}

// `pick` with what it does with its family's PCH: verify the file first, use it, build it or compile
// cold; nullopt: it waits for the PCH or for its batch.
std::optional<JitPool::State::Pick> JitPool::State::Weighing::with_pch(Job& job, Pick pick) {
  Family& f = s.families[job.family.key];
  if (f.pch == Family::Pch::unknown && found_pch_file(f, job.family.path)) {
    pick.verify = true;  // this thread checks the file's sum, then uses it
    pick.pch = PchMode::use;
    return pick;
  }
  switch (f.pch) {
    case Family::Pch::ready:
      pick.pch = PchMode::use;
      return pick;
    case Family::Pch::verifying:
    case Family::Pch::building:
      if (waits_for_pch(job, f)) return std::nullopt;
      return pick;  // cold is sooner, and nothing else would use the core
    case Family::Pch::absent: return build_or_gather(job, f, pick);
    case Family::Pch::unknown:
    case Family::Pch::unusable: break;
  }
  return pick;
}

// A family seen for the first time: whether a PCH file of an earlier process is there to verify.
bool JitPool::State::Weighing::found_pch_file(Family& f, const std::filesystem::path& path) {
  f.path = path;
  std::error_code ec;
  f.pch = std::filesystem::exists(f.path, ec) ? Family::Pch::verifying : Family::Pch::absent;
  if (f.pch == Family::Pch::verifying) f.since = now;
  return f.pch == Family::Pch::verifying;
}

// Waiting for the family's PCH being verified or built pays, or another request can use the core meanwhile
// (the critical path's unit waits only where it pays); never for a build far past its estimate.
bool JitPool::State::Weighing::waits_for_pch(Job& job, const Family& f) const {
  const double elapsed = ms_between(f.since, now);
  const double left = std::max(0.0, f.ready_estimate() - elapsed);
  const bool overdue = elapsed > 2 * f.ready_estimate() + kOverdueMs;
  const bool pays = left + f.warm_estimate() < f.cold_estimate();
  if (overdue || !(pays || (!on_critical_path(job) && other_work(job.family.key)))) return false;
  job.waited = true;
  return true;
}

// No PCH yet: while its batch is still arriving, the batch decides whether a PCH pays, and meanwhile other
// requests may go; the critical path's unit builds none, whatever the batch: it goes now.
std::optional<JitPool::State::Pick> JitPool::State::Weighing::build_or_gather(const Job& job, Family& f, Pick pick) {
  if (!on_critical_path(job) && batch_arriving(job)) {
    s.gathering = true;
    return std::nullopt;
  }
  if (builds_pch(job)) {
    f.pch = Family::Pch::building;
    f.since = now;
    pick.pch = PchMode::create;
  }
  return pick;
}

void JitPool::State::verified(const PchFamily& family, bool good) {
  Family& f = families[family.key];
  f.pch = good ? Family::Pch::ready : Family::Pch::absent;
  if (!good) ++stats.pch_rejected;
  wake.notify_all();
}

void JitPool::State::learn(const PchFamily& family, const Pick& pick, const CompileOutcome& outcome, double ms) {
  if (pick.link_threads != 1) ++stats.split_links;
  if (pick.critical) ++stats.split_critical;
  if (!family.key.empty() && pch_files) learn_family(family, pick, outcome, ms);
}

void JitPool::State::learn_family(const PchFamily& family, const Pick& pick, const CompileOutcome& outcome, double ms) {
  Family& f = families[family.key];
  std::error_code ignored;
  switch (outcome.pch) {
    case PchResult::created:
      ++stats.pch_created;
      f.pch = Family::Pch::ready;
      update(f.create_ms, ms);
      break;
    case PchResult::used:
      ++stats.pch_used;
      update(f.warm_ms, ms);
      break;
    case PchResult::rejected:
      // Written by another NVRTC or damaged: it cannot serve this process; the next one rebuilds it.
      ++stats.pch_rejected;
      std::filesystem::remove(f.path, ignored);
      std::filesystem::remove(f.path.string() + ".sum", ignored);
      f.pch = Family::Pch::unusable;
      break;
    case PchResult::failed:
      // The unit compiled without it: slower, never a failure. Said once.
      warn("pch", "not using a precompiled header (units compile without one): " + pch_problem(outcome.log));
      // It cannot be built here, or the file went (the cache's cap evicts PCH files before entries): the
      // family compiles without one in this process rather than build a file that may go again.
      f.pch = Family::Pch::unusable;
      break;
    case PchResult::none:
      if (outcome.entry) update(f.cold_ms, ms);
      break;
  }
  if (pick.pch == PchMode::create && outcome.pch != PchResult::created && f.pch == Family::Pch::building)
    f.pch = Family::Pch::unusable;
}

}  // namespace kiln::detail
