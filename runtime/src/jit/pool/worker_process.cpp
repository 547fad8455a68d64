// A kiln-jitd worker process from the host's side: spawn, hello, one request and its answer, retirement.
#include "jit/pool/worker_process.hpp"

#include "jit/pool/settings.hpp"  // worker_environment

#include <kiln/error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace kiln::detail {

namespace {

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + ::strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
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

// A failure message from a worker, as the exception compile_unit would have thrown in-process.
std::exception_ptr rethrowable(const Failure& f) {
  if (f.kiln_error) return std::make_exception_ptr(kiln::Error(static_cast<Errc>(f.code), f.message));
  return std::make_exception_ptr(kiln::Error(Errc::compile, f.message));
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

}  // namespace

std::string describe_unit(const CompileRequest& r) {
  return "unit " + r.registry + "/" + r.unit + " for sm_" + std::to_string(r.arch);
}

void block_sigpipe_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool Worker::exited() {
  if (reaped) return true;
  // ECHILD: the host ignores SIGCHLD, so the kernel reaped it already.
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid || (r < 0 && errno == ECHILD)) reaped = true;
  return reaped;
}

void Worker::close_input() {
  if (to >= 0) ::close(to);
  to = -1;
}

std::string Worker::retire(std::chrono::milliseconds grace) {
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
  }
  std::string how = "pid " + std::to_string(pid) + " " + describe_status(status);
  *this = Worker{};
  return how;
}

Result<Worker> spawn_worker(const std::filesystem::path& executable, bool without_aslr) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return fail(errno_text("pipe2"));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const std::string why = errno_text("pipe2");
    ::close(in[0]);
    ::close(in[1]);
    return fail(why);
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
  std::string arg0 = executable.string();
  char* argv[] = {arg0.data(), nullptr};
  // The host's environment, its malloc tunables amended: glibc reads them when the worker starts.
  std::vector<std::string> env = worker_environment(environ);
  // Its host, so that it dies with it (die_with_host).
  const std::string host_prefix = std::string(kHostPidVariable) + "=";
  std::erase_if(env, [&](const std::string& v) { return v.starts_with(host_prefix); });
  env.push_back(host_prefix + std::to_string(::getpid()));
  // A worker asked to keep ASLR on is told so: by itself it would turn it off (relaunch_without_aslr).
  if (!without_aslr) {
    std::erase_if(env, [](const std::string& v) { return v.starts_with("KILN_JIT_PCH="); });
    env.emplace_back("KILN_JIT_PCH=0");
  }
  std::vector<char*> envp;
  for (std::string& variable : env) envp.push_back(variable.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  // A personality is this thread's, and a child started from it inherits it: the worker then starts
  // with ASLR off, rather than executing itself again to turn it off (jit/worker/serve.hpp). This pool
  // thread starts nothing else, and the host's own memory map was laid out when it started.
  const int persona = without_aslr ? ::personality(0xffffffff) : -1;
  const bool switched = persona != -1 && (persona & ADDR_NO_RANDOMIZE) == 0 &&
                        ::personality(static_cast<unsigned long>(persona | ADDR_NO_RANDOMIZE)) != -1;
  const int rc = ::posix_spawn(&pid, executable.c_str(), &actions, &attr, argv, envp.data());
  if (switched) ::personality(static_cast<unsigned long>(persona));
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return fail(std::string("posix_spawn: ") + std::strerror(rc));
  }
  // Non-blocking on this side, so that a stuck worker never pins the thread that talks to it.
  for (const int fd : {in[1], out[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  Worker w;
  w.pid = pid;
  w.to = in[1];
  w.from = out[0];
  return w;
}


Status read_hello(Worker& w, const KeepWaiting& keep_waiting) {
  const FrameRead read = read_frame(w.from, keep_waiting);
  if (read.status != IoStatus::ok)
    return fail(read.status == IoStatus::end_of_stream ? "it closed its output" : read.error.empty() ? "no hello" : read.error);
  const auto message = open_frame(read.frame);
  if (!message) return fail(message.error());
  if (message->kind != MessageKind::hello) return fail("its first message is not a hello");
  const Result<Hello> hello = decode_hello(message->body);
  if (!hello) return fail(hello.error());
  if (hello->cache_format != kCacheFormatVersion)
    return fail("it is built for cache format " + std::to_string(hello->cache_format) + ", this libkiln for " +
                std::to_string(kCacheFormatVersion));
  w.pch_files = hello->pch_files;
  return ok();
}

Answer exchange(Worker& w, const CompileRequest& request, const KeepWaiting& keep_waiting) {
  Answer a;
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
    a.problem = "bad answer frame: " + message.error();
    return a;
  }
  if (message->kind == MessageKind::outcome) {
    auto outcome = decode_outcome(message->body);
    if (!outcome.ok()) return a.problem = outcome.error(), a;
    a.outcome = std::move((*outcome));
  } else if (message->kind == MessageKind::failure) {
    const auto failure = decode_failure(message->body);
    if (!failure.ok()) return a.problem = failure.error(), a;
    a.exception = rethrowable((*failure));
  } else {
    a.problem = "answered with message kind " + std::to_string(static_cast<unsigned>(message->kind));
    return a;
  }
  a.answered = true;
  return a;
}

}  // namespace kiln::detail
