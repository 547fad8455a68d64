// The host's side of forking a JIT worker from a warm one: the fork request, the new worker's hello, pidfds.
#include "jit/pool/fork.hpp"

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
  if (!message.ok()) return give_up(ForkStatus::zygote_broke, "bad fork answer frame: " + message.error);
  if (message.value.kind != MessageKind::forked)
    return give_up(ForkStatus::zygote_broke, "answered a fork request with message kind " +
                                                 std::to_string(static_cast<unsigned>(message.value.kind)));
  const auto forked = decode_forked(message.value.body);
  if (!forked.ok()) return give_up(ForkStatus::zygote_broke, forked.error);
  if (forked.value.pid <= 0) return give_up(ForkStatus::refused, forked.value.error);
  w.pid = static_cast<pid_t>(forked.value.pid);
  w.pidfd = open_pidfd(w.pid);
  if (w.pidfd < 0) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " is gone: " + errno_text("pidfd_open"));

  const auto deadline = std::chrono::steady_clock::now() + hello_timeout;
  const FrameRead hello_read = read_frame(w.from, [&] {
    return (!keep_waiting || keep_waiting()) && !pidfd_ended(w.pidfd) && std::chrono::steady_clock::now() < deadline;
  });
  if (hello_read.status != IoStatus::ok) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " did not say hello");
  const auto hello_message = open_frame(hello_read.frame);
  const auto hello = hello_message.ok() && hello_message.value.kind == MessageKind::hello
                         ? decode_hello(hello_message.value.body)
                         : Checked<Hello>{{}, hello_message.ok() ? "its first message is not a hello" : hello_message.error};
  if (!hello.ok()) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + ": " + hello.error);
  if (hello.value.pid != forked.value.pid)
    return give_up(ForkStatus::failed, "the forked worker says it is pid " + std::to_string(hello.value.pid) +
                                           ", the zygote said " + std::to_string(w.pid));
  // Only the child holds the other end of its input now: while that end is open the child lives, so
  // it lived when the pidfd was opened, and the pidfd is the child's (not a reuse of its pid).
  if (!peer_open(w.to)) return give_up(ForkStatus::failed, "the forked worker " + std::to_string(w.pid) + " ended at once");
  for (const int fd : {w.to, w.from}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  r.status = ForkStatus::forked;
  return r;
}

}  // namespace kiln::detail
