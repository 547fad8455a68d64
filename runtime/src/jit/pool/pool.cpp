// JitPool: a queue, one host thread per worker process, PCH-family dispatch, spawn or fork, retry-once and shutdown.
#include "jit/pool/pool.hpp"

#include "jit/protocol.hpp"
#include "jit/pool/fork.hpp"
#include "jit/pch_family.hpp"

#include <kiln/error.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

extern char** environ;

namespace kiln::detail {

namespace {

constexpr unsigned kDefaultWorkersCap = 16;  // docs/DESIGN.md: 16 processes gave 8.6x on 16 cores
constexpr int kAttempts = 2;                 // a request goes to at most two workers
// A started worker says hello within milliseconds; this only bounds a stuck start.
constexpr auto kHelloTimeout = std::chrono::seconds(30);
// How long a worker may take to exit by itself before it is killed: after its output ended (so that
// its own exit status is reported), and after its input was closed at shutdown.
constexpr auto kExitGrace = std::chrono::milliseconds(300);
// How long a request waits at most for a busy worker that holds its family's PCH to fork it a worker.
// It waits only for one that compiles warm, and the pool gives such a worker no new request while
// others wait, so about one warm compile is expected; past this, a cold worker is as quick.
constexpr auto kForkWait = std::chrono::seconds(5);
// At shutdown, how long a worker waits for the workers forked from it to be retired first, so that none
// is left for init to adopt; they end within kExitGrace.
constexpr auto kChildrenWait = std::chrono::seconds(3);

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

std::string describe_unit(const CompileRequest& r) {
  return "unit " + r.registry + "/" + r.unit + " for sm_" + std::to_string(r.arch);
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Keeps `fd` off 0, 1 and 2, so that the child's dup2 onto them always happens (dup2(fd, fd) would not
// clear close-on-exec). Returns the descriptor to use, still close-on-exec.
int above_stdio(int fd) {
  if (fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  ::close(fd);
  return moved;
}

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
  bool exited() {
    if (reaped) return true;
    if (forked()) return reaped = pidfd_ended(pidfd);
    // ECHILD: the host ignores SIGCHLD, so the kernel reaped it already.
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) reaped = true;
    return reaped;
  }

  void close_input() {
    if (to >= 0) ::close(to);
    to = -1;
  }

  // Waits up to `grace` for the worker to exit, then kills it; reaps it; closes the pipes. Returns
  // "pid N <how it ended>". Killing only after a failed WNOHANG wait (or through the pidfd) means the
  // pid is still ours. A forked worker's exit status goes to its zygote; only its end is seen here.
  std::string retire(std::chrono::milliseconds grace) {
    close_input();
    if (from >= 0) ::close(from);
    from = -1;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!exited() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool killed = !reaped;
    if (killed && forked()) {
      kill_pidfd(pidfd);
      wait_pidfd(pidfd, std::chrono::seconds(10));
    } else if (killed) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    std::string how = "pid " + std::to_string(pid) + " ";
    if (forked()) {
      how += killed ? "(forked) killed by the pool" : "(forked) ended";
      ::close(pidfd);
    } else {
      how += describe_status(status);
    }
    *this = Worker{};
    return how;
  }
};

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

// What a worker said about one request: an outcome, an exception to rethrow, or nothing (it broke).
struct Answer {
  bool answered = false;
  CompileOutcome outcome;
  std::exception_ptr exception;
  std::string problem;  // when not answered
};

// A failure message from a worker, as the exception compile_unit would have thrown in-process.
std::exception_ptr rethrowable(const Failure& f) {
  if (f.kiln_error) return std::make_exception_ptr(kiln::Error(static_cast<Errc>(f.code), f.message));
  return std::make_exception_ptr(std::runtime_error(f.message));
}

void block_sigpipe_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// A write to a dead worker's pipe leaves SIGPIPE pending on this thread (it is blocked here); take it,
// so that it is never delivered later to anything.
void discard_pending_sigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  const timespec zero{0, 0};
  while (::sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

bool is_executable_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

const char anchor = 0;  // an address inside libkiln, for dladdr

std::filesystem::path libkiln_dir() {
  Dl_info info{};
  std::filesystem::path file;
  if (::dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0] != '\0') file = info.dli_fname;
  else file = "/proc/self/exe";  // libkiln linked statically: its code is the executable's
  std::error_code ec;
  const auto resolved = std::filesystem::canonical(file, ec);
  return (ec ? std::filesystem::absolute(file, ec) : resolved).parent_path();
}

}  // namespace

unsigned jit_workers_from(const char* value, std::string& warning) {
  const unsigned fallback = std::clamp(std::thread::hardware_concurrency(), 1u, kDefaultWorkersCap);
  if (value == nullptr || *value == '\0') return fallback;
  const std::string_view text(value);
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc{} && end == text.data() + text.size() && n >= 1 && n <= kMaxJitWorkers) return n;
  warning = "KILN_JIT_WORKERS='" + std::string(text) + "' is not a whole number from 1 to " +
            std::to_string(kMaxJitWorkers) + "; using " + std::to_string(fallback) + " JIT workers";
  return fallback;
}

bool jit_fork_from(const char* value, std::string& warning) {
  const std::string_view text = value == nullptr ? "" : value;
  if (text.empty() || text == "1") return true;
  if (text == "0") return false;
  warning = "KILN_JIT_FORK='" + std::string(text) + "' is neither 0 nor 1; forking JIT workers from warm ones stays on";
  return true;
}

std::vector<std::filesystem::path> jit_worker_candidates() {
  if (const char* env = std::getenv("KILN_JITD"); env != nullptr && *env != '\0') return {env};
  std::vector<std::filesystem::path> places{libkiln_dir() / "kiln-jitd"};
#ifdef KILN_JITD_INSTALL_PATH
  places.emplace_back(KILN_JITD_INSTALL_PATH);
#endif
  return places;
}

std::filesystem::path find_jit_worker() {
  for (const auto& p : jit_worker_candidates())
    if (is_executable_file(p)) return p;
  return {};
}

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
  std::vector<std::string> warning_kinds, warnings;

  void warn(const std::string& kind, const std::string& message) {
    const std::lock_guard lock(mutex);
    if (std::find(warning_kinds.begin(), warning_kinds.end(), kind) != warning_kinds.end()) return;
    warning_kinds.push_back(kind);
    warnings.push_back(message);
    std::fprintf(stderr, "kiln: warning: %s\n", message.c_str());
  }

  template <typename F>
  void count(F&& update) {
    const std::lock_guard lock(mutex);
    update(stats);
  }

  static void fail(Job& job, std::string error) {
    CompileOutcome o;
    o.error = std::move(error);
    job.promise.set_value(std::move(o));
  }

  // --- Dispatch (all under `mutex`) ---

  // Whether `s`'s worker can fork workers that hold `family`'s PCH.
  bool can_fork_for(const Slot& s, const std::string& family) const {
    return s.has_worker() && s.refused.count(family) == 0 && s.warm.count(family) > 0;
  }
  bool zygote_exists(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(),
                       [&](const auto& s) { return s.get() != self && can_fork_for(*s, family); });
  }
  // A worker started from the executable first: where linking starts a thread (the CUDA driver's), a
  // forked worker has no zygote of the family it was forked for, and refuses.
  Slot* idle_zygote(const std::string& family, const Slot* self) const {
    Slot* found = nullptr;
    for (const auto& s : slots)
      if (s.get() != self && !s->busy && !s->lent && can_fork_for(*s, family) && (!found || (s->root && !found->root)))
        found = s.get();
    return found;
  }
  // Whether a worker that can fork for `family` is only forking or compiling warm, and so will be idle
  // within about one warm compile; one that builds another family's PCH is not worth waiting for.
  bool zygote_soon_idle(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(), [&](const auto& s) {
      return s.get() != self && can_fork_for(*s, family) && (s->lent || s->warming.empty());
    });
  }
  // Whether a thread other than `self` took a request of `family` to run on a worker it will fork:
  // until it asks (fork_for), a worker that holds the family must stay idle for it too.
  bool fork_coming(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(),
                       [&](const auto& s) { return s.get() != self && s->will_fork == family; });
  }
  bool held_elsewhere(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(),
                       [&](const auto& s) { return s.get() != self && s->has_worker() && s->warm.count(family) > 0; });
  }
  bool warming_elsewhere(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(),
                       [&](const auto& s) { return s.get() != self && s->warming == family; });
  }
  // Whether an idle thread other than `self` would take a request of `family` now and fork a worker
  // for it: it has no worker, or one that holds neither `family` nor any family with queued requests
  // or fork waiters (it would serve those first), and that no worker was forked from (it would keep
  // that one and build the PCH itself).
  bool another_would_fork(const std::string& family, const Slot* self) const {
    return std::any_of(slots.begin(), slots.end(), [&](const auto& s) {
      if (s.get() == self || s->busy || s->lent) return false;
      if (!s->has_worker()) return true;
      if (s->children > 0 || s->warm.count(family) > 0) return false;
      return std::none_of(s->warm.begin(), s->warm.end(), [&](const std::string& held) {
        return fork_waiters.count(held) > 0 ||
               std::any_of(queue.begin(), queue.end(), [&](const Job& j) { return j.family == held; });
      });
    });
  }

  // The queued request `slot`'s thread should run next, or kNone to wait. Marks the slot as warming
  // the family of a request whose PCH nobody holds or builds yet.
  std::size_t pick(Slot& slot) {
    if (slot.lent) return kNone;
    const bool lends = forking && slot.has_worker();
    // Threads wait to fork a worker from this one: stay idle for them.
    if (lends)
      for (const std::string& family : slot.warm)
        if ((fork_waiters.count(family) > 0 || fork_coming(family, &slot)) && slot.refused.count(family) == 0)
          return kNone;
    // Its own families first. But where another idle thread would fork a worker from this one for
    // the request, leave the request to it: it runs as soon, and one more worker is warm. (That thread
    // has no own requests to run, so it never leaves this one to this thread in turn.)
    if (slot.has_worker()) {
      for (std::size_t i = 0; i < queue.size(); ++i) {
        if (queue[i].family.empty() || slot.warm.count(queue[i].family) == 0) continue;
        if (lends && slot.refused.count(queue[i].family) == 0 && another_would_fork(queue[i].family, &slot))
          return kNone;
        return i;
      }
    }
    // Then the oldest request it can start now: one whose family some worker holds (forked), or whose
    // PCH nobody builds yet (this worker builds it). A family's other requests wait for its builder.
    for (std::size_t i = 0; i < queue.size(); ++i) {
      const std::string& family = queue[i].family;
      if (family.empty()) return i;
      if (zygote_exists(family, &slot)) {
        // It will fork a worker for it (fork_for): the worker it forks from must not take a request
        // meanwhile, or both could wait on each other (a request that waits for another one).
        if (!(slot.has_worker() && slot.warm.count(family) > 0)) slot.will_fork = family;
        return i;
      }
      // Waiting for the family's builder pays only while no worker holds the family: where one does
      // and still cannot fork for it (it refused: it runs threads), the builder will not fork either, and
      // a request left waiting behind it waits for a whole compile (or for ever, behind a request that
      // waits on this one).
      if (!warming_elsewhere(family, &slot) || held_elsewhere(family, &slot)) {
        slot.warming = family;
        return i;
      }
    }
    return kNone;
  }

  // --- One host thread per worker ---

  // It takes jobs while the pool runs, and owns its worker process.
  void serve(Slot& slot) {
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
  std::string retire(Slot& slot, std::chrono::milliseconds grace) {
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

  void run(Job& job, Slot& slot) {
    bool in_process;
    {
      const std::lock_guard lock(mutex);
      in_process = in_process_only;
    }
    if (in_process) return compile_here(job);
    std::vector<std::string> deaths;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      std::string why;
      if (!provide_worker(slot, job.family, why)) {
        if (stopping) return fail(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
        // Never in-process after a death: the unit may be what crashes the compiler.
        if (!deaths.empty())
          return fail(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: its worker died (" +
                               deaths.front() + ") and no new one could be started: " + why);
        return give_up_on_workers(job, why);
      }
      Answer answer = exchange(slot.worker, job.request);
      if (answer.answered) {
        if (!job.family.empty() && !answer.exception && answer.outcome.ok) {
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
      if (stopping) return fail(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
      deaths.push_back(how + " (" + answer.problem + ")");
      count([&](JitPoolStats& s) {
        ++s.deaths;
        if (attempt + 1 < kAttempts) ++s.retried;
      });
    }
    std::string list;
    for (const auto& d : deaths) list += (list.empty() ? "" : "; ") + d;
    fail(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: its worker died twice (" + list +
                  "); not retried again");
  }

  void compile_here(Job& job) {
    count([](JitPoolStats& s) { ++s.in_process; });
    try {
      job.promise.set_value(options.in_process(job.request));
    } catch (...) {
      job.promise.set_exception(std::current_exception());
    }
  }

  // No worker could be started for a fresh request: compile it here. If no worker ever started, the
  // executable cannot work here, so stop trying; otherwise the failure may pass (out of processes).
  void give_up_on_workers(Job& job, const std::string& why) {
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
  bool provide_worker(Slot& slot, const std::string& family, std::string& why) {
    if (!family.empty()) {
      bool own_is_warm;
      {
        const std::lock_guard lock(mutex);
        own_is_warm = slot.has_worker() && slot.warm.count(family) > 0;
      }
      if (!own_is_warm && fork_for(slot, family)) return true;
    }
    if (!slot.worker.running()) {
      if (stopping) return why = "the pool is shutting down", false;
      if (!start(slot, why)) return false;
    }
    const std::lock_guard lock(mutex);
    slot.warming = !family.empty() && slot.warm.count(family) == 0 ? family : std::string();
    return true;
  }

  // Forks a worker for the slot from an idle worker that holds `family`'s PCH, waiting for one that
  // is busy; false when there is none (or forking failed), and the slot should go on cold.
  bool fork_for(Slot& slot, const std::string& family) {
    std::unique_lock lock(mutex);
    slot.will_fork.clear();  // from here on it is lent a zygote or counted in fork_waiters, or goes cold
    for (;;) {
      if (stopping || !zygote_exists(family, &slot)) return false;
      // A worker others were forked from stays: the slot compiles cold in it.
      if (slot.has_worker() && slot.children > 0) return false;
      Slot* zygote = idle_zygote(family, &slot);
      if (zygote == nullptr) {
        if (!zygote_soon_idle(family, &slot)) return false;
        ++fork_waiters[family];
        const bool ready = wake.wait_for(lock, kForkWait, [&] {
          return stopping || idle_zygote(family, &slot) != nullptr || !zygote_soon_idle(family, &slot);
        });
        if (--fork_waiters[family] == 0) fork_waiters.erase(family);
        wake.notify_all();  // the zygotes that stayed idle for this thread may take requests again
        if (!ready) return false;
        continue;
      }
      zygote->lent = true;
      const std::uint64_t zygote_id = zygote->id;
      lock.unlock();

      Worker& z = zygote->worker;  // ours while lent
      const ForkResult result = fork_worker(
          z.to, z.from, family, [&] { return !stopping && !z.exited(); }, [&] { return !stopping.load(); }, kHelloTimeout);
      std::string zygote_how;
      if (result.status == ForkStatus::zygote_broke) zygote_how = retire(*zygote, kExitGrace);
      if (result.status == ForkStatus::forked && slot.worker.running()) retire(slot, kExitGrace);
      std::string warning;
      lock.lock();
      zygote->lent = false;
      if (result.status == ForkStatus::forked) {
        Worker& w = slot.worker;
        w = Worker{};
        w.pid = result.worker.pid;
        w.pidfd = result.worker.pidfd;
        w.to = result.worker.to;
        w.from = result.worker.from;
        w.id = next_worker_id++;
        w.parent = zygote_id;
        slot.pid = w.pid;
        slot.id = w.id;
        slot.warm = zygote->warm;  // every PCH the zygote held
        slot.warming.clear();
        slot.refused.clear();
        slot.root = false;
        slot.children = 0;
        ++zygote->children;
        live.insert(w.pid);
        ++stats.forked;
        wake.notify_all();
        return true;
      }
      ++stats.fork_failures;
      if (result.status == ForkStatus::refused) zygote->refused.insert(family);
      if (result.status != ForkStatus::zygote_broke)
        warning = "cannot fork a JIT worker from warm worker pid " + std::to_string(zygote->pid) + ": " + result.problem +
                  "; starting cold workers, each building its own precompiled header";
      else
        warning = "a warm JIT worker broke while forking (" + result.problem + "; " + zygote_how + ")";
      wake.notify_all();
      lock.unlock();
      warn("fork", warning);
      // A refusing or broken zygote is out of the running, so the next try asks another; a failure of
      // this process's own (descriptors, a child that died at once) would only repeat: go on cold.
      if (result.status == ForkStatus::failed) return false;
      lock.lock();
    }
  }

  bool start(Slot& slot, std::string& why) {
    Worker& w = slot.worker;
    if (worker_path.empty()) {
      why = no_worker_reason;
      return false;
    }
    if (!spawn(w, why)) {
      why = "cannot start the JIT worker " + worker_path.string() + ": " + why;
      return false;
    }
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
    const FrameRead read = read_frame(w.from, [&] {
      return !stopping && !w.exited() && std::chrono::steady_clock::now() < deadline;
    });
    std::string problem;
    if (read.status == IoStatus::ok) {
      const auto message = open_frame(read.frame);
      const auto hello = message.ok() && message.value.kind == MessageKind::hello ? decode_hello(message.value.body)
                                                                                  : Checked<Hello>{};
      if (!message.ok()) problem = message.error;
      else if (message.value.kind != MessageKind::hello) problem = "its first message is not a hello";
      else if (!hello.ok()) problem = hello.error;
      else if (hello.value.cache_format != kCacheFormatVersion)
        problem = "it is built for cache format " + std::to_string(hello.value.cache_format) + ", this libkiln for " +
                  std::to_string(kCacheFormatVersion);
    } else {
      problem = read.status == IoStatus::end_of_stream ? "it closed its output" : read.error.empty() ? "no hello" : read.error;
    }
    if (problem.empty()) {
      const std::lock_guard lock(mutex);
      started_one = true;
      return true;
    }
    const std::string how = retire(slot, kExitGrace);
    why = "the JIT worker " + worker_path.string() + " did not start: " + problem + "; " + how;
    return false;
  }

  // Input: a unix socket (a fork request passes descriptors over it); output: a pipe.
  bool spawn(Worker& w, std::string& why) {
    int in[2], out[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return why = errno_text("socketpair"), false;
    if (::pipe2(out, O_CLOEXEC) != 0) {
      why = errno_text("pipe2");
      ::close(in[0]);
      ::close(in[1]);
      return false;
    }
    for (int* fd : {&in[0], &in[1], &out[0], &out[1]}) *fd = above_stdio(*fd);
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);  // this thread blocks SIGPIPE; the worker must not inherit that
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    std::string arg0 = worker_path.string(), no_fork = kNoForkArgument;
    char* argv[] = {arg0.data(), forking ? nullptr : no_fork.data(), nullptr};  // no zygotes when never forking
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, worker_path.c_str(), &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      why = std::string("posix_spawn: ") + std::strerror(rc);
      return false;
    }
    // Non-blocking on this side, so that a stuck worker never pins the thread that talks to it.
    for (const int fd : {in[1], out[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    w = Worker{};
    w.pid = pid;
    w.to = in[1];
    w.from = out[0];
    return true;
  }

  Answer exchange(Worker& w, const CompileRequest& request) {
    Answer a;
    // Checked on every silent poll interval: a dead worker is noticed even if its pipe stays open.
    const KeepWaiting keep_waiting = [&] { return !stopping && !w.exited(); };
    const WriteResult sent = write_frame(w.to, encode_request(request), keep_waiting);
    if (sent.status != IoStatus::ok) {
      discard_pending_sigpipe();
      a.problem = sent.status == IoStatus::abandoned ? "it stopped reading" : "sending the request: " + sent.error;
      return a;
    }
    const FrameRead read = read_frame(w.from, keep_waiting);
    if (read.status != IoStatus::ok) {
      a.problem = read.status == IoStatus::end_of_stream ? "its output ended before an answer"
                  : read.status == IoStatus::abandoned    ? "it ended without answering"
                                                          : "reading its answer: " + read.error;
      return a;
    }
    const auto message = open_frame(read.frame);
    if (!message.ok()) {
      a.problem = "bad answer frame: " + message.error;
      return a;
    }
    if (message.value.kind == MessageKind::outcome) {
      auto outcome = decode_outcome(message.value.body);
      if (!outcome.ok()) return a.problem = outcome.error, a;
      a.outcome = std::move(outcome.value);
    } else if (message.value.kind == MessageKind::failure) {
      const auto failure = decode_failure(message.value.body);
      if (!failure.ok()) return a.problem = failure.error, a;
      a.exception = rethrowable(failure.value);
    } else {
      a.problem = "answered with message kind " + std::to_string(static_cast<unsigned>(message.value.kind));
      return a;
    }
    a.answered = true;
    return a;
  }
};

JitPool::JitPool(JitPoolOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  if (s.options.workers > 0) {
    s.max_workers = s.options.workers;
  } else {
    std::string warning;
    s.max_workers = jit_workers_from(std::getenv("KILN_JIT_WORKERS"), warning);
    if (!warning.empty()) s.warn("workers", warning);
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
    std::string warning;
    fork = jit_fork_from(std::getenv("KILN_JIT_FORK"), warning);
    if (!warning.empty()) s.warn("fork setting", warning);
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
    State::fail(job, "kiln: the JIT pool shut down before compiling " + describe_unit(job.request));
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
  return state_->warnings;
}

}  // namespace kiln::detail
