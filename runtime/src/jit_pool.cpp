// runtime/src/jit_pool.cpp — JitPool: a queue, one host thread per worker process, spawn, retry-once and shutdown.
#include "jit_pool.hpp"

#include "jit_protocol.hpp"

#include <kiln/error.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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
#include <mutex>
#include <set>
#include <thread>

extern char** environ;

namespace kiln::detail {

namespace {

constexpr unsigned kDefaultWorkersCap = 16;  // DESIGN.md: 16 processes gave 8.6x on 16 cores
constexpr int kAttempts = 2;                 // a request goes to at most two workers
// A started worker says hello within milliseconds; this only bounds a stuck start.
constexpr auto kHelloTimeout = std::chrono::seconds(30);
// How long a worker may take to exit by itself before it is killed: after its output ended (so that
// its own exit status is reported), and after its input was closed at shutdown.
constexpr auto kExitGrace = std::chrono::milliseconds(300);

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

// One worker process and this process's ends of its pipes, both close-on-exec so that no other child
// inherits them (an inherited write end would hide the worker's death from its reader).
struct Worker {
  pid_t pid = -1;
  int to = -1;    // its stdin
  int from = -1;  // its stdout
  bool reaped = false;
  int status = 0;  // wait status, once reaped

  bool running() const noexcept { return pid > 0; }

  // Reaps the worker if it has exited; true then.
  bool exited() {
    if (reaped) return true;
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
  // "pid N <how it ended>". Killing only after a failed WNOHANG wait means the pid is still ours.
  std::string retire(std::chrono::milliseconds grace) {
    close_input();
    if (from >= 0) ::close(from);
    from = -1;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!exited() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!reaped) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      reaped = true;
    }
    std::string how = "pid " + std::to_string(pid) + " " + describe_status(status);
    *this = Worker{};
    return how;
  }
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
  };

  JitPoolOptions options;
  unsigned max_workers = 1;
  std::filesystem::path worker_path;
  std::string no_worker_reason;  // when worker_path is empty: where it looked
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Job> queue;
  std::vector<std::thread> threads;
  std::size_t idle = 0;           // threads waiting for a job
  bool in_process_only = false;   // no worker can be started: every request compiles here
  bool started_one = false;       // a worker has said hello once
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

  // One host thread per worker: it takes jobs while the pool runs, and owns its worker process.
  void serve() {
    block_sigpipe_in_this_thread();
    Worker worker;
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex);
        ++idle;
        wake.wait(lock, [&] { return stopping.load() || !queue.empty(); });
        --idle;
        if (stopping) break;
        job = std::move(queue.front());
        queue.pop_front();
      }
      run(job, worker);
    }
    // An idle worker exits at the end of its input, which retire closes first.
    if (worker.running()) retire(worker, kExitGrace);
  }

  // Retires `worker` (see Worker::retire) and drops it from the live set.
  std::string retire(Worker& worker, std::chrono::milliseconds grace) {
    const pid_t pid = worker.pid;
    std::string how = worker.retire(grace);
    const std::lock_guard lock(mutex);
    live.erase(pid);
    return how;
  }

  void run(Job& job, Worker& worker) {
    bool in_process;
    {
      const std::lock_guard lock(mutex);
      in_process = in_process_only;
    }
    if (in_process) return compile_here(job);
    std::vector<std::string> deaths;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (!worker.running()) {
        std::string why;
        if (!start(worker, why)) {
          if (stopping) return fail(job, "kiln: the JIT pool shut down while compiling " + describe_unit(job.request));
          // Never in-process after a death: the unit may be what crashes the compiler.
          if (!deaths.empty())
            return fail(job, "kiln: JIT compile of " + describe_unit(job.request) + " failed: its worker died (" +
                                 deaths.front() + ") and no new one could be started: " + why);
          return give_up_on_workers(job, why);
        }
      }
      Answer answer = exchange(worker, job.request);
      if (answer.answered) {
        if (answer.exception) return job.promise.set_exception(answer.exception);
        return job.promise.set_value(std::move(answer.outcome));
      }
      const std::string how = retire(worker, stopping ? std::chrono::milliseconds(0) : kExitGrace);
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

  bool start(Worker& w, std::string& why) {
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
      live.insert(w.pid);
      ++stats.spawned;
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
    const std::string how = retire(w, kExitGrace);
    why = "the JIT worker " + worker_path.string() + " did not start: " + problem + "; " + how;
    return false;
  }

  bool spawn(Worker& w, std::string& why) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return why = errno_text("pipe2"), false;
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
    std::string arg0 = worker_path.string();
    char* argv[] = {arg0.data(), nullptr};
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
  State::Job job{std::move(request), {}};
  auto future = job.promise.get_future();
  {
    const std::lock_guard lock(s.mutex);
    // Each idle thread takes one queued job; start another (and, through it, a worker) when none is free.
    if (s.queue.size() + 1 > s.idle && s.threads.size() < s.max_workers) s.threads.emplace_back([&s] { s.serve(); });
    s.queue.push_back(std::move(job));
  }
  s.wake.notify_one();
  return future;
}

CompileOutcome JitPool::compile(const CompileRequest& request) { return submit(request).get(); }

unsigned JitPool::max_workers() const noexcept { return state_->max_workers; }

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
