// The host's side of forking a JIT worker from a warm one: the fork request, the new worker's hello, pidfds.
#include "jit/pool/fork.hpp"

#include "jit/pool/pool_state.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::detail {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// Whether the peer of our socket end still holds its end open.
bool peer_open(int socket) {
  pollfd p{socket, POLLOUT, 0};
  return ::poll(&p, 1, 0) >= 0 && !(p.revents & (POLLHUP | POLLERR));
}

}  // namespace

bool forking_supported() {
  static const bool supported = [] {
    const int fd = open_pidfd(::getpid());
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }();
  return supported;
}

bool pidfd_ended(int pidfd) { return wait_pidfd(pidfd, std::chrono::milliseconds(0)); }

bool wait_pidfd(int pidfd, std::chrono::milliseconds timeout) {
  pollfd p{pidfd, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (n >= 0) return n > 0;
    if (errno != EINTR) return false;
  }
}

void kill_pidfd(int pidfd) {
#ifdef SYS_pidfd_send_signal
  ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
#else
  (void)pidfd;
#endif
}

ForkResult fork_worker(int zygote_to, int zygote_from, std::string_view family, const KeepWaiting& zygote_alive,
                       const KeepWaiting& keep_waiting, std::chrono::milliseconds hello_timeout) {
  ForkResult r;
  ForkedWorker& w = r.worker;
  // The child's ends travel to the zygote; ours stay close-on-exec so that no other child inherits
  // them (an inherited end would hide the worker's death from its reader).
  int sockets[2], pipe_ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) return {ForkStatus::failed, {}, errno_text("socketpair")};
  if (::pipe2(pipe_ends, O_CLOEXEC) != 0) {
    r.problem = errno_text("pipe2");
    ::close(sockets[0]);
    ::close(sockets[1]);
    return r;
  }
  w.to = sockets[0];
  w.from = pipe_ends[0];
  int child_in = sockets[1], child_out = pipe_ends[1];
  const int passed[] = {child_in, child_out};
  const WriteResult sent = write_frame_passing(zygote_to, encode_fork(family), passed, zygote_alive);
  // The zygote holds its copies now; the child's ends must not stay open here.
  close_fd(child_in);
  close_fd(child_out);

  const auto give_up = [&](ForkStatus status, std::string problem) {
    if (w.pidfd >= 0 && !pidfd_ended(w.pidfd)) {
      kill_pidfd(w.pidfd);
      wait_pidfd(w.pidfd, std::chrono::seconds(5));
    }
    close_fd(w.pidfd);
    close_fd(w.to);
    close_fd(w.from);
    w.pid = -1;
    return ForkResult{status, {}, std::move(problem)};
  };

  if (sent.status != IoStatus::ok) {
    if (sent.status == IoStatus::error) return give_up(ForkStatus::refused, "sending the fork request: " + sent.error);
    return give_up(ForkStatus::zygote_broke,
                   sent.status == IoStatus::abandoned ? "it stopped reading" : "it closed its input");
  }
  const FrameRead read = read_frame(zygote_from, zygote_alive);
  if (read.status != IoStatus::ok)
    return give_up(ForkStatus::zygote_broke, read.status == IoStatus::end_of_stream ? "its output ended before it answered the fork request"
                                             : read.status == IoStatus::abandoned ? "it ended without answering the fork request"
                                                                                  : "reading its fork answer: " + read.error);
  const auto message = open_frame(read.frame);
  if (!message.ok()) return give_up(ForkStatus::zygote_broke, "bad fork answer frame: " + message.error());
  if (message->kind != MessageKind::forked)
    return give_up(ForkStatus::zygote_broke, "answered a fork request with message kind " +
                                                 std::to_string(static_cast<unsigned>(message->kind)));
  const auto forked = decode_forked(message->body);
  if (!forked.ok()) return give_up(ForkStatus::zygote_broke, forked.error());
  if (forked->pid <= 0) return give_up(ForkStatus::refused, forked->error);
  w.pid = static_cast<pid_t>(forked->pid);
  w.pidfd = open_pidfd(w.pid);
  if (w.pidfd < 0) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " is gone: " + errno_text("pidfd_open"));

  const auto deadline = std::chrono::steady_clock::now() + hello_timeout;
  const FrameRead hello_read = read_frame(w.from, [&] {
    return (!keep_waiting || keep_waiting()) && !pidfd_ended(w.pidfd) && std::chrono::steady_clock::now() < deadline;
  });
  if (hello_read.status != IoStatus::ok) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " did not say hello");
  const auto hello_message = open_frame(hello_read.frame);
  const Result<Hello> hello = !hello_message                              ? fail(hello_message.error())
                              : hello_message->kind != MessageKind::hello ? fail("its first message is not a hello")
                                                                          : decode_hello(hello_message->body);
  if (!hello.ok()) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + ": " + hello.error());
  if (hello->pid != forked->pid)
    return give_up(ForkStatus::failed, "the forked worker says it is pid " + std::to_string(hello->pid) +
                                           ", the zygote said " + std::to_string(w.pid));
  // Only the child holds the other end of its input now: while that end is open the child lives, so
  // it lived when the pidfd was opened, and the pidfd is the child's (not a reuse of its pid).
  if (!peer_open(w.to)) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " ended at once");
  for (const int fd : {w.to, w.from}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  r.status = ForkStatus::forked;
  return r;
}

// Forks a worker for the slot from an idle worker that holds `family`'s PCH, waiting for one that
// is busy; false when there is none (or forking failed), and the slot should go on cold.
bool JitPool::State::fork_for(Slot& slot, const std::string& family) {
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

}  // namespace kiln::detail
