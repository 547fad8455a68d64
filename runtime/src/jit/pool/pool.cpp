// JitPool: one host thread per worker process, each taking requests as the dispatch allots them, with
// a bounded wait for each answer, retry-once, in-process fallback and shutdown.
#include "jit/pool/pool.hpp"

#include "base/settings.hpp"
#include "base/thread_start.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/pool_state.hpp"
#include "jit/pool/settings.hpp"
#include "chain/unit_key.hpp"  // kProgramRegistry

#include <kiln/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <thread>

namespace kiln::detail {

namespace {

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

void JitPool::State::fail_job(Job& job, std::string error) {
  CompileOutcome o;
  o.entry = fail(std::move(error));
  job.finish(std::move(o));
}

void JitPool::State::serve(Slot& slot) {
  block_sigpipe_in_this_thread();
  if (slot.start_ahead) start_before_requests(slot);
  for (;;) {
    Job job;
    Pick pick;
    {
      std::unique_lock lock(mutex);
      const std::optional<Pick> picked = wait_for_pick(lock);
      if (!picked) break;
      pick = *picked;
      job = take(slot, pick);
    }
    if (pick.verify) verify_pch_first(job, pick);
    run(job, slot, pick);
    ended(slot, job, pick);
  }
  leave(slot);
}

// Counted idle since add_slot: a request arriving meanwhile waits for this worker's hello (and warm-up)
// rather than start another. A failed start is met again, and reported, by the first request.
void JitPool::State::start_before_requests(Slot& slot) {
  if (start(slot) && slot.warm_arch != 0) warm_up(slot, slot.warm_arch);
  const std::lock_guard lock(mutex);
  --idle;
}

// The pick of the job this thread runs next, counted idle meanwhile; nullopt once the pool stops.
std::optional<JitPool::State::Pick> JitPool::State::wait_for_pick(std::unique_lock<std::mutex>& lock) {
  std::optional<Pick> picked;
  ++idle;
  while (!stopping && !(picked = pick())) wait_for_work(lock);
  --idle;
  if (stopping) return std::nullopt;
  return picked;
}

// A thread whose requests all wait (for a PCH, their batch, a worker) looks again soon: waiting may stop
// paying. With nothing queued it sleeps until notified (a request, a shutdown): an idle pool in a
// long-running process costs no wake-ups, but one to drop the host's PCH copies.
void JitPool::State::wait_for_work(std::unique_lock<std::mutex>& lock) {
  if (queue.empty() && pch_copies_held && busy == 0) {
    if (Clock::now() < idle_since + options.pch_linger) {
      wake.wait_until(lock, idle_since + options.pch_linger);
    } else {
      pch_copies_held = false;
      lock.unlock();  // their memory goes outside the lock
      pch_copies.drop_all();
      lock.lock();
    }
  } else if (queue.empty()) {
    wake.wait(lock);
  } else {
    wake.wait_for(lock, gathering ? kGather : kRecheck);
  }
}

// The picked job out of the queue, the slot busy with it.
JitPool::State::Job JitPool::State::take(Slot& slot, const Pick& pick) {
  Job job = std::move(queue[pick.index]);
  queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(pick.index));
  slot.busy = true;
  slot.estimate_ms = job.estimate();
  slot.critical = pick.critical;
  slot.started = Clock::now();
  ++busy;
  if (job.waited) ++stats.pch_waits;
  if (pick.beyond) ++stats.beyond;
  return job;
}

// This thread's turn to check the family's PCH file: a file that fails is not used.
void JitPool::State::verify_pch_first(const Job& job, Pick& pick) {
  const Status good = verify_pch(job.family.path);
  if (!good && !good.error().empty()) warn("pch", "not using a precompiled header: " + good.error());
  const std::lock_guard lock(mutex);
  verified(job.family, good.ok());
  if (!good) pick.pch = PchMode::none;
}

// The job ended: the slot is free again.
void JitPool::State::ended(Slot& slot, const Job& job, const Pick& pick) {
  {
    const std::lock_guard lock(mutex);
    // A PCH build that ended without the worker's answer (compiled in this process, or the pool shut
    // down) taught nothing: the family may build it again, and nobody waits for it meanwhile.
    if (pick.pch == PchMode::create) {
      Family& f = families[job.family.key];
      if (f.pch == Family::Pch::building) f.pch = Family::Pch::absent;
    }
    slot.busy = false;
    slot.estimate_ms = 0;
    slot.critical = false;
    --busy;
    if (busy == 0 && queue.empty()) idle_since = Clock::now();
  }
  wake.notify_all();
}

// The pool stops: the slot's worker retired, and the slot done (JitPool::shutdown waits for that).
void JitPool::State::leave(Slot& slot) {
  // An idle worker exits at the end of its input, which retire closes first.
  if (slot.worker.running()) retire(slot, kExitGrace);
  {
    const std::lock_guard lock(mutex);
    slot.done = true;
  }
  wake.notify_all();
}

std::string JitPool::State::retire(Slot& slot, std::chrono::milliseconds grace) {
  const pid_t pid = slot.worker.pid;
  std::string how = slot.worker.retire(grace);
  {
    const std::lock_guard lock(mutex);
    live.erase(pid);
    slot.pid = 0;
  }
  wake.notify_all();
  return how;
}

void JitPool::State::run(Job& job, Slot& slot, const Pick& pick) {
  if (only_in_process()) return compile_here(job);
  prepare_request(job, pick);
  // A program given at run time is untrusted input: it compiles in a worker with ASLR on, unless it
  // builds or reads its family's PCH, kiln's own file checked against its sum, which needs ASLR off
  // (docs/DESIGN.md, "Programs given at run time"). A worker started so serves no unit's PCH after.
  const bool keep_aslr = job.request.registry == kProgramRegistry && job.request.pch == PchMode::none;
  retire_unfit_worker(slot, job, keep_aslr);
  const HostPchCopies::Copy copy = host_pch_copy(job, slot);  // held until the answer
  Deaths deaths;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (!slot.worker.running() && !start_for(job, slot, keep_aslr, deaths)) return;
    if (run_on_worker(job, slot, pick, copy, deaths, attempt)) return;
  }
  fail_after_deaths(job, deaths);
}

bool JitPool::State::only_in_process() {
  const std::lock_guard lock(mutex);
  return in_process_only;
}

// The request as the pick decided: its PCH, its file, and the threads its compilers may use.
void JitPool::State::prepare_request(Job& job, const Pick& pick) {
  CompileRequest& request = job.request;
  request.pch = pick.pch;
  request.pch_path = pick.pch == PchMode::none ? std::string() : job.family.path.string();
  if (request.pch == PchMode::use) touch_pch(job.family.path);  // most recently used: the cap evicts it last
  request.link_threads = pick.link_threads;
  request.pch_unpacked.clear();
}

// Retires the slot's worker where it cannot serve the request: its ASLR is not the request's, or NVRTC
// there would refuse the PCH file the request builds or reads.
void JitPool::State::retire_unfit_worker(Slot& slot, const Job& job, bool keep_aslr) {
  const CompileRequest& request = job.request;
  Worker& w = slot.worker;
  if (w.running() && ((keep_aslr && w.pch_files) || (!keep_aslr && w.keeps_aslr && request.pch != PchMode::none)))
    retire(slot, kExitGrace);
  // A PCH file other processes can read is one NVRTC wrote from a fresh heap: built on a fresh worker
  // (docs/DESIGN.md, "PCH across processes": written after a compile, it was refused elsewhere).
  if (request.pch == PchMode::create && w.running() && w.requests > 0) retire(slot, kExitGrace);
  // Likewise NVRTC reads a PCH file written elsewhere only in a fresh worker (measured: a worker that
  // compiled another unit first has it refused, "incompatible precompiled header"), or in one whose last
  // request created or read that same file.
  if (request.pch == PchMode::use && w.running() && w.requests > 0 && w.reads_pch != job.family.key)
    retire(slot, kExitGrace);
}

// The family's PCH unpacked once in this process, which the worker opens (docs/DESIGN.md, "PCH files at
// rest"), unless the worker keeps the copy its last request used. The caller holds it until the answer:
// the copy lives while the worker may still open it. A copy that cannot be made: the family compiles
// without a PCH.
HostPchCopies::Copy JitPool::State::host_pch_copy(Job& job, const Slot& slot) {
  CompileRequest& request = job.request;
  HostPchCopies::Copy copy;
  if (request.pch != PchMode::use || (slot.worker.running() && slot.worker.holds_pch == job.family.key)) return copy;
  Result<HostPchCopies::Copy> got = pch_copies.get(job.family.key, job.family.path);
  if (got) {
    copy = std::move(got).value();
  } else {
    // As for a file the worker cannot unpack: one warning, and the family compiles without a PCH.
    warn("pch", "not using a precompiled header (units compile without one): " + got.error());
    const std::lock_guard lock(mutex);
    families[job.family.key].pch = Family::Pch::unusable;
    request.pch = PchMode::none;
    request.pch_path.clear();
  }
  if (copy.pch) {
    request.pch_unpacked = copy.pch->shared_path();
    const std::lock_guard lock(mutex);
    pch_copies_held = true;
  }
  return copy;
}

// Starts the slot's worker for the job; where none can be started, ends the job and returns false: failed
// at shutdown or after a death (never in-process then: the unit may be what crashes the compiler), else
// compiled here.
bool JitPool::State::start_for(Job& job, Slot& slot, bool keep_aslr, const Deaths& deaths) {
  const Status started = stopping ? Status(fail("the pool is shutting down")) : start(slot, keep_aslr);
  if (started) return true;
  const CompileRequest& request = job.request;
  if (stopping) {
    fail_job(job, "kiln: the JIT pool shut down while compiling " + describe_unit(request));
  } else if (!deaths.list.empty()) {
    fail_job(job, "kiln: JIT compile of " + describe_unit(request) + " failed: its worker died (" +
                      deaths.list.front() + ") and no new one could be started: " + started.error());
  } else {
    give_up_on_workers(job, started.error());
  }
  return false;
}

// One attempt on the slot's running worker, within a slot of the machine-wide budget waited for within
// the request's own bound: true when the job has ended (answered, or the pool stops), false when the
// worker died or gave no answer in time (recorded in `deaths`).
bool JitPool::State::run_on_worker(Job& job, Slot& slot, const Pick& pick, const HostPchCopies::Copy& copy,
                                   Deaths& deaths, int attempt) {
  Worker& w = slot.worker;
  if (!w.pch_files && job.request.pch != PchMode::none) stop_pch_files(job.request);
  const auto asked = Clock::now();
  MachineSlots::Held held = budget_slot(timeout);
  const auto start_time = Clock::now();
  if (missed(held) && !stopping) over_budget();
  const auto deadline = start_time + timeout;
  bool timed_out = false;
  Answer answer = exchange(w, job.request, [&] {
    if (Clock::now() > deadline) timed_out = true;
    return !stopping && !timed_out && !w.exited();
  });
  if (answer.answered) {
    trace_answer(job, w, pick, copy, answer.outcome, asked, start_time);
    answered(job, w, pick, answer, start_time);
    return true;
  }
  return died(job, slot, answer.problem, timed_out, deaths, attempt);
}

// This worker's NVRTC cannot read PCH files (ASLR could not be turned off): none for the pool.
void JitPool::State::stop_pch_files(CompileRequest& request) {
  {
    const std::lock_guard lock(mutex);
    pch_files = false;
  }
  warn("aslr", "JIT workers run with ASLR on here, so NVRTC cannot reuse precompiled headers across processes; "
               "units compile without them (docs/DESIGN.md, \"PCH across processes\")");
  request.pch = PchMode::none;
}

void JitPool::State::trace_answer(const Job& job, const Worker& w, const Pick& pick, const HostPchCopies::Copy& copy,
                                  const CompileOutcome& outcome, Clock::time_point asked, Clock::time_point start_time) {
  if (!trace.on()) return;
  const CompileRequest& request = job.request;
  PoolTrace::Request r{request.registry + "/" + request.unit, request.arch, w.pid, job.queued, start_time,
                       Clock::now(), outcome.nvrtc_ms, outcome.link_ms, job.estimate_ms, request.link_threads,
                       request.pch == PchMode::create ? "create" : request.pch == PchMode::use ? "use" : "none",
                       pick.critical, pick.beyond, asked,
                       request.pch == PchMode::use && !request.pch_unpacked.empty(), copy.unpack_ms,
                       outcome.pch_unpack_ms};
  if (job.whole) r.part = job.part_label();
  trace.request(r);
}

// The worker answered: what it now holds of the family's PCH, what the pool learns, and the job's end.
void JitPool::State::answered(Job& job, Worker& w, const Pick& pick, Answer& answer, Clock::time_point start_time) {
  ++w.requests;
  const bool read = answer.outcome.pch == PchResult::created || answer.outcome.pch == PchResult::used;
  w.reads_pch = read ? job.family.key : std::string();
  w.holds_pch = answer.outcome.pch == PchResult::used ? job.family.key : std::string();
  // A file NVRTC refused, or one the worker could not read: the family compiles without it now.
  if (answer.outcome.pch == PchResult::rejected || answer.outcome.pch == PchResult::failed) pch_copies.drop(job.family.key);
  {
    const std::lock_guard lock(mutex);
    if (!answer.exception) learn(job.family, pick, answer.outcome, ms_since(start_time));
  }
  wake.notify_all();
  if (answer.exception) return job.finish(answer.exception);
  job.finish(std::move(answer.outcome));
}

// The worker died, or gave no answer in time and is killed: true when the pool stops (the job failed).
bool JitPool::State::died(Job& job, Slot& slot, const std::string& problem, bool timed_out, Deaths& deaths, int attempt) {
  const std::string how = retire(slot, stopping || timed_out ? std::chrono::milliseconds(0) : kExitGrace);
  if (stopping) {
    fail_job(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
    return true;
  }
  deaths.list.push_back(how + " (" + (timed_out ? no_answer_within() : problem) + ")");
  deaths.timeouts += timed_out ? 1 : 0;
  count([&](JitPoolStats& s) {
    ++s.deaths;
    if (timed_out) ++s.timeouts;
    if (attempt + 1 < kAttempts) ++s.retried;
  });
  return false;
}

std::string JitPool::State::no_answer_within() const {
  return "no answer within " + std::to_string(timeout.count() / 1000) + " s (KILN_JIT_TIMEOUT)";
}

// Every attempt's worker died or gave no answer: the job fails, saying each.
void JitPool::State::fail_after_deaths(Job& job, const Deaths& deaths) {
  {
    const std::lock_guard lock(mutex);
    if (job.request.pch == PchMode::create) families[job.family.key].pch = Family::Pch::unusable;
  }
  std::string list;
  for (const auto& d : deaths.list) list += (list.empty() ? "" : "; ") + d;
  // What went wrong first: a worker that gave no answer in time was killed, it did not die by itself.
  const std::string what =
      deaths.timeouts == deaths.list.size() ? "its worker gave " + no_answer_within() + ", twice" : "its worker died twice";
  fail_job(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: " + what + " (" + list +
                    "); not retried again");
}

void JitPool::State::compile_here(Job& job) {
  count([](JitPoolStats& s) { ++s.in_process; });
  CompileRequest& request = job.request;
  request.pch = PchMode::none;  // this process runs with ASLR on: NVRTC here cannot read PCH files
  // A compile here is a compile on the machine's cores as a worker's is: it takes a slot of the budget.
  const auto asked = Clock::now();
  MachineSlots::Held held = budget_slot(timeout);
  const auto start_time = Clock::now();
  if (missed(held)) {
    if (stopping) return fail_job(job, "kiln: the JIT pool shut down before compiling " + describe_unit(request));
    over_budget();
  }
  try {
    CompileOutcome outcome = options.in_process(request);
    held.release();
    PoolTrace::Request r{request.registry + "/" + request.unit, request.arch, 0, job.queued, start_time, Clock::now(),
                         outcome.nvrtc_ms, outcome.link_ms, job.estimate_ms, request.link_threads, "none", false,
                         false, asked};
    if (job.whole) r.part = job.part_label();
    trace.request(r);
    job.finish(std::move(outcome));
  } catch (const Error&) {
    job.finish(std::current_exception());  // no_compiler, say: what the caller is to be told as it is
  } catch (const std::bad_alloc&) {
    job.finish(std::current_exception());
  } catch (const std::exception& e) {
    fail_job(job, "kiln: JIT compile of " + describe_unit(request) + " in this process failed: " + e.what());
  } catch (...) {
    fail_job(job, "kiln: JIT compile of " + describe_unit(request) + " in this process failed: an exception that is not a std::exception");
  }
}

MachineSlots::Held JitPool::State::budget_slot(std::chrono::milliseconds bound, const std::function<bool()>& keep_waiting) {
  const auto asked = Clock::now();
  MachineSlots::Held held = budget->acquire(bound, [&] { return !stopping && (!keep_waiting || keep_waiting()); });
  if (budget->on() && !held.holds()) {
    if (const std::string problem = budget->problem(); !problem.empty())
      warn("budget", problem + " (" + (budget->size() == 1 ? "1 slot" : std::to_string(budget->size()) + " slots") + ")");
  }
  if (Clock::now() - asked > std::chrono::milliseconds(1)) count([](JitPoolStats& s) { ++s.budget_waits; });
  return held;
}

void JitPool::State::over_budget() {
  warn("over budget", "no compile slot of the machine's " + std::to_string(budget->size()) +
                          " (KILN_JIT_MACHINE_SLOTS) came free within " + std::to_string(timeout.count() / 1000) +
                          " s (KILN_JIT_TIMEOUT): compiling beyond the budget");
  count([](JitPoolStats& s) { ++s.over_budget; });
}

void JitPool::State::give_up_on_workers(Job& job, const std::string& why) {
  {
    const std::lock_guard lock(mutex);
    if (!started_one) in_process_only = true;
  }
  warn("no worker", why + "; compiling JIT units in this process, where NVRTC does not run in parallel"
                          " (set KILN_JITD to the kiln-jitd executable to fix this)");
  compile_here(job);
}

Status JitPool::State::start(Slot& slot, bool keep_aslr) {
  if (worker_path.empty()) return fail(no_worker_reason);
  bool without_aslr;
  {
    const std::lock_guard lock(mutex);
    without_aslr = pch_files && !keep_aslr;
  }
  const auto asked = Clock::now();
  Result<Worker> spawned = spawn_worker(worker_path, without_aslr);
  if (!spawned) return fail("cannot start the JIT worker " + worker_path.string() + ": " + spawned.error());
  Worker& w = slot.worker;
  w = std::move(spawned).value();
  w.keeps_aslr = keep_aslr;
  {
    const std::lock_guard lock(mutex);
    live.insert(w.pid);
    ++stats.spawned;
    slot.pid = w.pid;
  }
  const auto deadline = Clock::now() + hello_timeout();
  const Status hello = read_hello(w, [&] { return !stopping && !w.exited() && Clock::now() < deadline; });
  if (hello) {
    trace.spawn(w.pid, asked, Clock::now());
    const std::lock_guard lock(mutex);
    started_one = true;
    return ok();
  }
  const std::string how = retire(slot, kExitGrace);
  return fail("the JIT worker " + worker_path.string() + " did not start: " + hello.error() + "; " + how);
}

namespace {
// A setting of the pool: the option given in code, else the environment variable (a value that does not
// parse is a warning, once), else `fallback`.
template <typename T>
T pool_setting(WarnOnce& warnings, const std::optional<T>& option, Result<T> (*parse)(const char*),
               SettingName variable, std::string_view what, T fallback) {
  if (option) return *option;
  const Result<T> asked = parse(setting(variable).c_str());
  if (!asked) warnings.warn(what, asked.error());
  return asked ? *asked : fallback;
}

// An option given in code where it is above zero.
template <typename T>
std::optional<T> given(T option) {
  return option > T{} ? std::optional<T>(option) : std::nullopt;
}
}  // namespace

JitPool::JitPool(JitPoolOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  s.read_settings();
  s.budget = s.machine_budget();
  s.find_worker();
}

void JitPool::State::read_settings() {
  max_workers = pool_setting(warnings, given(options.workers), jit_workers_from, "KILN_JIT_WORKERS", "workers",
                             default_jit_workers());
  cores = options.cores > 0 ? options.cores : std::max(1u, std::thread::hardware_concurrency());
  if (!trace.problem().empty()) warn("trace", trace.problem());
  timeout = pool_setting(warnings, given(options.timeout), jit_timeout_from, "KILN_JIT_TIMEOUT", "timeout",
                         std::chrono::milliseconds(kDefaultJitTimeout));
  if (const Result<std::uint64_t> memory = jit_memory_from(setting("KILN_JIT_MEMORY").c_str()); !memory)
    warn("memory", memory.error());  // the workers read it themselves, and take the default
  pch_files = pool_setting(warnings, options.pch_files, jit_pch_from, "KILN_JIT_PCH", "pch setting", true);
  split = pool_setting(warnings, options.split, jit_split_from, "KILN_JIT_SPLIT", "split setting", SplitMode::cost_model);
}

// A process alone never waits for a slot by default: the budget binds where processes share the cores.
std::unique_ptr<MachineSlots> JitPool::State::machine_budget() {
  const unsigned own = max_workers + beyond_workers();
  const Result<unsigned> slots = options.machine_slots > 0 ? Result<unsigned>(options.machine_slots)
                                 : machine_slots_from(setting("KILN_JIT_MACHINE_SLOTS").c_str(),
                                                      std::max(std::max(1u, std::thread::hardware_concurrency()), own));
  if (!slots) warn("machine slots", slots.error());
  return std::make_unique<MachineSlots>(options.budget_dir,
                                        slots ? *slots : std::max(std::thread::hardware_concurrency(), own));
}

// The worker executable: the one given in code, else KILN_JITD's, else the first found where it is
// installed; where none is, why not (start() says it).
void JitPool::State::find_worker() {
  const bool from_env = options.worker.empty() && !setting("KILN_JITD").empty();
  const auto places = options.worker.empty() ? jit_worker_candidates() : std::vector{options.worker};
  for (const auto& p : places) {
    if (is_executable_file(p)) {
      worker_path = p;
      return;
    }
  }
  std::string list;
  for (const auto& p : places) list += (list.empty() ? "" : ", ") + p.string();
  no_worker_reason = from_env ? "KILN_JITD=" + list + " is not an executable file"
                              : "no JIT worker executable found (looked for " + list + ")";
}

JitPool::~JitPool() { shutdown(); }

void JitPool::shutdown(std::optional<std::chrono::milliseconds> bound) {
  State& s = *state_;
  std::deque<State::Job> queued;
  std::vector<std::thread> threads;
  std::vector<bool> done;
  {
    std::unique_lock lock(s.mutex);
    s.stopping = true;
    queued.swap(s.queue);
    s.wake.notify_all();
    // Busy threads see `stopping` within a poll of their worker's pipe (kPollMs), kill their worker and
    // reap it; idle ones close their worker's input and wait kExitGrace for it to end.
    const auto all_done = [&] {
      return std::all_of(s.slots.begin(), s.slots.end(), [](const auto& slot) { return slot->done; });
    };
    if (bound) s.wake.wait_for(lock, *bound, all_done);
    threads.swap(s.threads);
    for (const auto& slot : s.slots) done.push_back(slot->done);
  }
  for (auto& job : queued)
    State::fail_job(job, "kiln: the JIT pool shut down before compiling " + describe_unit(job.request));
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (!bound || done[i]) threads[i].join();
    else threads[i].detach();  // compiling in this process, which is exiting: its end ends it
  }
}

std::future<CompileOutcome> JitPool::submit(CompileRequest request, PchFamily family, double estimate_ms,
                                            UnitSplit split) {
  State& s = *state_;
  State::Job job{std::move(request), {}, std::move(family)};
  job.estimate_ms = std::max(0.0, estimate_ms);
  job.split = split;
  auto future = job.promise.get_future();
  {
    const std::lock_guard lock(s.mutex);
    if (s.stopping) {
      State::fail_job(job, "kiln: the JIT pool shut down before compiling " + describe_unit(job.request));
      return future;
    }
    // Each idle thread takes one queued job; start another (and, through it, a worker) when none is free.
    const std::size_t waiting = s.queue.size();
    // Up to beyond_workers() more threads wait too, for a table's tail (the dispatch keeps them idle otherwise).
    if (waiting + 1 > s.idle && s.threads.size() < s.max_workers + s.beyond_workers()) {
      // Without a thread of its own the threads there are take it in turn; with none, nothing would.
      if (const Status added = s.add_slot(false); !added && s.threads.empty()) {
        State::fail_job(job, "kiln: JIT compile of " + describe_unit(job.request) + " not started: " + added.error());
        return future;
      }
    }
    s.queue.push_back(std::move(job));
    s.last_arrival = Clock::now();
  }
  // All: a thread may pass over a job (its family's PCH is being built elsewhere), another take it.
  s.wake.notify_all();
  return future;
}

void JitPool::State::warm_up(Slot& slot, unsigned arch) {
  CompileRequest request;
  request.registry = "kiln";
  request.unit = "warm-up";
  request.source_name = "kiln_warm_up.cu";
  request.source = "extern \"C\" __global__ void kiln_warm_up() {}\n";
  request.kernels = {{"kiln_warm_up", "kiln_warm_up"}};
  request.expressions = {"kiln_warm_up"};
  request.arch = arch;
  Worker& w = slot.worker;
  // A compile as any other: it takes a slot of the budget, waiting for one within the warm-up's bound and
  // only while no request is queued. A request that comes meanwhile is served by this worker at once,
  // unwarmed, rather than wait for a slot twice; a warm-up that gets no slot is left out.
  const auto asked = Clock::now();
  MachineSlots::Held held = budget_slot(hello_timeout(), [&] {
    const std::lock_guard lock(mutex);
    return queue.empty();
  });
  if (missed(held)) {
    count([](JitPoolStats& s) { ++s.warm_ups_left_out; });
    return;
  }
  const auto start_time = Clock::now();
  const auto deadline = start_time + hello_timeout();
  const Answer answer = exchange(w, request, [&] { return !stopping && !w.exited() && Clock::now() < deadline; });
  held.release();
  if (!answer.answered) {
    (void)retire(slot, std::chrono::milliseconds(0));  // the first request starts another, and says why if it cannot
    return;
  }
  // Its heap is no longer a fresh worker's: the PCH rules replace it before it builds or reads a PCH file.
  ++w.requests;
  trace.request({request.registry + "/" + request.unit, arch, w.pid, asked, start_time, Clock::now(),
                 answer.outcome.nvrtc_ms, answer.outcome.link_ms, 0, 1, "none", false, false, asked});
  if (answer.outcome.entry.ok()) count([](JitPoolStats& s) { ++s.warmed_up; });
}

Status JitPool::State::add_slot(bool ahead, unsigned warm_arch) {
  Slot& slot = *slots.emplace_back(std::make_unique<Slot>());
  slot.start_ahead = ahead;
  slot.warm_arch = warm_arch;
  Result<std::thread> thread = start_thread([this, &slot] { serve(slot); });
  if (!thread) {
    slots.pop_back();  // slots[i] belongs to threads[i]
    return fail(thread.error());
  }
  threads.push_back(std::move(thread).value());
  return ok();
}

void JitPool::start_ahead(unsigned warm_arch) {
  State& s = *state_;
  const std::lock_guard lock(s.mutex);
  if (s.stopping || s.worker_path.empty() || s.in_process_only || !s.threads.empty()) return;
  if (!s.add_slot(true, warm_arch)) return;  // no thread to be had now: the first request starts one, or says why not
  ++s.idle;  // until its worker said hello and warmed up (serve)
  ++s.stats.started_ahead;
}

CompileOutcome JitPool::compile(const CompileRequest& request, PchFamily family, double estimate_ms, UnitSplit split) {
  return submit(request, std::move(family), estimate_ms, split).get();
}

unsigned JitPool::max_workers() const noexcept { return state_->max_workers; }

bool JitPool::uses_pch_files() const noexcept {
  const std::lock_guard lock(state_->mutex);
  return state_->pch_files;
}

const std::filesystem::path& JitPool::worker_path() const noexcept { return state_->worker_path; }

std::vector<pid_t> JitPool::worker_pids() const {
  const std::lock_guard lock(state_->mutex);
  return {state_->live.begin(), state_->live.end()};
}

JitPoolStats JitPool::stats() const {
  const std::lock_guard lock(state_->mutex);
  return state_->stats;
}

std::vector<std::string> JitPool::warnings() const { return state_->warnings.printed(); }

}  // namespace kiln::detail
