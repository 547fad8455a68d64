// JitPool: one host thread per worker process, each taking requests as the dispatch allots them, with
// retry-once, in-process fallback and shutdown.
#include "jit/pool/pool.hpp"

#include "jit/pch_family.hpp"
#include "jit/pool/fork.hpp"
#include "jit/pool/pool_state.hpp"
#include "jit/pool/settings.hpp"

#include <kiln/error.hpp>

#include <cstdlib>

namespace kiln::detail {

void JitPool::State::fail_job(Job& job, std::string error) {
  CompileOutcome o;
  o.entry = fail(std::move(error));
  job.promise.set_value(std::move(o));
}

// It takes jobs while the pool runs, and owns its worker process.
void JitPool::State::serve(Slot& slot) {
  block_sigpipe_in_this_thread();
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex);
      std::size_t index = kNone;
      ++idle;
      wake.wait(lock, [&] { return stopping || (index = pick(slot)) != kNone; });
      --idle;
      if (stopping) {
        slot.warming.clear();
        break;
      }
      job = std::move(queue[index]);
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(index));
      slot.busy = true;
    }
    run(job, slot);
    {
      const std::lock_guard lock(mutex);
      slot.busy = false;
      slot.warming.clear();
      slot.will_fork.clear();  // when the request never got to fork_for (in-process, own worker warm)
    }
    wake.notify_all();
  }
  {
    std::unique_lock lock(mutex);
    wake.wait(lock, [&] { return !slot.lent; });
  }
  // An idle worker exits at the end of its input, which retire closes first.
  if (slot.worker.running()) retire(slot, kExitGrace);
}

// Retires the slot's worker (see Worker::retire) and forgets it.
std::string JitPool::State::retire(Slot& slot, std::chrono::milliseconds grace) {
  {
    // At shutdown the workers forked from this one go first: none is left for init to adopt.
    std::unique_lock lock(mutex);
    if (stopping) wake.wait_for(lock, kChildrenWait, [&] { return slot.children == 0; });
  }
  const pid_t pid = slot.worker.pid;
  const std::uint64_t parent = slot.worker.parent;
  std::string how = slot.worker.retire(grace);
  {
    const std::lock_guard lock(mutex);
    live.erase(pid);
    slot.pid = 0;
    slot.id = 0;
    slot.warm.clear();
    slot.warming.clear();
    slot.refused.clear();
    slot.root = false;
    slot.children = 0;
    if (parent != 0)
      for (const auto& s : slots)
        if (s->id == parent && s->children > 0) --s->children;
  }
  wake.notify_all();
  return how;
}

void JitPool::State::run(Job& job, Slot& slot) {
  bool in_process;
  {
    const std::lock_guard lock(mutex);
    in_process = in_process_only;
  }
  if (in_process) return compile_here(job);
  std::vector<std::string> deaths;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const Status provided = provide_worker(slot, job.family);
    if (!provided) {
      const std::string& why = provided.error();
      if (stopping) return fail_job(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
      // Never in-process after a death: the unit may be what crashes the compiler.
      if (!deaths.empty())
        return fail_job(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: its worker died (" +
                             deaths.front() + ") and no new one could be started: " + why);
      return give_up_on_workers(job, why);
    }
    Worker& w = slot.worker;
    Answer answer = exchange(w, job.request, [&] { return !stopping && !w.exited(); });
    if (answer.answered) {
      if (!job.family.empty() && !answer.exception && answer.outcome.entry) {
        const std::lock_guard lock(mutex);
        // NVRTC built or used the family's PCH in it. Both at once: a thread that saw the slot warm
        // but still warming would take it for busy with another PCH and start a cold worker.
        slot.warm.insert(job.family);
        slot.warming.clear();
      }
      if (answer.exception) return job.promise.set_exception(answer.exception);
      return job.promise.set_value(std::move(answer.outcome));
    }
    const std::string how = retire(slot, stopping ? std::chrono::milliseconds(0) : kExitGrace);
    if (stopping) return fail_job(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
    deaths.push_back(how + " (" + answer.problem + ")");
    count([&](JitPoolStats& s) {
      ++s.deaths;
      if (attempt + 1 < kAttempts) ++s.retried;
    });
  }
  std::string list;
  for (const auto& d : deaths) list += (list.empty() ? "" : "; ") + d;
  fail_job(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: its worker died twice (" + list +
                "); not retried again");
}

void JitPool::State::compile_here(Job& job) {
  count([](JitPoolStats& s) { ++s.in_process; });
  try {
    job.promise.set_value(options.in_process(job.request));
  } catch (...) {
    job.promise.set_exception(std::current_exception());
  }
}

// No worker could be started for a fresh request: compile it here. If no worker ever started, the
// executable cannot work here, so stop trying; otherwise the failure may pass (out of processes).
void JitPool::State::give_up_on_workers(Job& job, const std::string& why) {
  {
    const std::lock_guard lock(mutex);
    if (!started_one) in_process_only = true;
  }
  warn("no worker", why + "; compiling JIT units in this process, where NVRTC does not run in parallel"
                          " (set KILN_JITD to the kiln-jitd executable to fix this)");
  compile_here(job);
}

// Gives the slot a worker for a request of `family`: its own, if that one holds the family's PCH (or
// there is no family); else one forked from a worker that holds it; else its own as it is (it builds
// the PCH), or a new one from the executable.
Status JitPool::State::provide_worker(Slot& slot, const std::string& family) {
  if (!family.empty()) {
    bool own_is_warm;
    {
      const std::lock_guard lock(mutex);
      own_is_warm = slot.has_worker() && slot.warm.count(family) > 0;
    }
    if (!own_is_warm && fork_for(slot, family)) return ok();
  }
  if (!slot.worker.running()) {
    if (stopping) return fail("the pool is shutting down");
    if (Status started = start(slot); !started) return started;
  }
  const std::lock_guard lock(mutex);
  slot.warming = !family.empty() && slot.warm.count(family) == 0 ? family : std::string();
  return ok();
}

Status JitPool::State::start(Slot& slot) {
  if (worker_path.empty()) return fail(no_worker_reason);
  Result<Worker> spawned = spawn_worker(worker_path, forking);
  if (!spawned) return fail("cannot start the JIT worker " + worker_path.string() + ": " + spawned.error());
  Worker& w = slot.worker;
  w = std::move(spawned).value();
  {
    const std::lock_guard lock(mutex);
    w.id = next_worker_id++;
    live.insert(w.pid);
    ++stats.spawned;
    slot.pid = w.pid;
    slot.id = w.id;
    slot.warm.clear();
    slot.refused.clear();
    slot.root = true;
    slot.children = 0;
  }
  const auto deadline = std::chrono::steady_clock::now() + kHelloTimeout;
  const Status hello = read_hello(w, [&] { return !stopping && !w.exited() && std::chrono::steady_clock::now() < deadline; });
  if (hello) {
    const std::lock_guard lock(mutex);
    started_one = true;
    return ok();
  }
  const std::string how = retire(slot, kExitGrace);
  return fail("the JIT worker " + worker_path.string() + " did not start: " + hello.error() + "; " + how);
}

JitPool::JitPool(JitPoolOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  if (s.options.workers > 0) {
    s.max_workers = s.options.workers;
  } else {
    const Result<unsigned> workers = jit_workers_from(std::getenv("KILN_JIT_WORKERS"));
    if (!workers) s.warn("workers", workers.error());
    s.max_workers = workers ? *workers : default_jit_workers();
  }
  const bool from_env = s.options.worker.empty() && std::getenv("KILN_JITD") != nullptr && *std::getenv("KILN_JITD") != '\0';
  const auto places = s.options.worker.empty() ? jit_worker_candidates() : std::vector{s.options.worker};
  for (const auto& p : places) {
    if (is_executable_file(p)) {
      s.worker_path = p;
      break;
    }
  }
  if (s.worker_path.empty()) {
    std::string list;
    for (const auto& p : places) list += (list.empty() ? "" : ", ") + p.string();
    s.no_worker_reason = from_env ? "KILN_JITD=" + list + " is not an executable file"
                                  : "no JIT worker executable found (looked for " + list + ")";
  }
  bool fork = true;
  if (s.options.fork) {
    fork = *s.options.fork;
  } else {
    const Result<bool> asked = jit_fork_from(std::getenv("KILN_JIT_FORK"));
    if (!asked) s.warn("fork setting", asked.error());
    fork = asked ? *asked : true;
  }
  s.forking = fork && forking_supported();
}

JitPool::~JitPool() {
  State& s = *state_;
  std::deque<State::Job> queued;
  {
    const std::lock_guard lock(s.mutex);
    s.stopping = true;
    queued.swap(s.queue);
  }
  s.wake.notify_all();
  for (auto& job : queued)
    State::fail_job(job, "kiln: the JIT pool shut down before compiling " + describe_unit(job.request));
  for (auto& t : s.threads) t.join();
}

std::future<CompileOutcome> JitPool::submit(CompileRequest request) {
  State& s = *state_;
  State::Job job{std::move(request), {}, {}};
  if (s.forking) job.family = pch_family(job.request);
  auto future = job.promise.get_future();
  {
    const std::lock_guard lock(s.mutex);
    // Each idle thread takes one queued job; start another (and, through it, a worker) when none is free.
    if (s.queue.size() + 1 > s.idle && s.threads.size() < s.max_workers) {
      Slot& slot = *s.slots.emplace_back(std::make_unique<Slot>());
      s.threads.emplace_back([&s, &slot] { s.serve(slot); });
    }
    s.queue.push_back(std::move(job));
  }
  // All: a thread may pass over a job (its family's PCH is being built elsewhere), another take it.
  s.wake.notify_all();
  return future;
}

CompileOutcome JitPool::compile(const CompileRequest& request) { return submit(request).get(); }

unsigned JitPool::max_workers() const noexcept { return state_->max_workers; }

bool JitPool::forks_workers() const noexcept { return state_->forking; }

const std::filesystem::path& JitPool::worker_path() const noexcept { return state_->worker_path; }

std::vector<pid_t> JitPool::worker_pids() const {
  const std::lock_guard lock(state_->mutex);
  return {state_->live.begin(), state_->live.end()};
}

JitPoolStats JitPool::stats() const {
  const std::lock_guard lock(state_->mutex);
  return state_->stats;
}

std::vector<std::string> JitPool::warnings() const {
  const std::lock_guard lock(state_->mutex);
  return state_->warnings.printed();
}

}  // namespace kiln::detail
