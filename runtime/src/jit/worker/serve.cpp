// A compile worker's loop (hello, then one answer per request or fork frame, until EOF), and its PCH families' zygotes.
#include "jit/worker/serve.hpp"

#include "jit/compiler/pch_dir.hpp"
#include "jit/protocol.hpp"
#include "jit/pch_family.hpp"

#include <kiln/error.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln::detail {

namespace {

int quit(const std::string& what) {
  std::fprintf(stderr, "kiln-jitd[%ld]: %s\n", static_cast<long>(::getpid()), what.c_str());
  return 2;
}

void close_all(std::vector<int>& fds) {
  for (const int fd : fds) ::close(fd);
  fds.clear();
}

// This process's threads, from /proc/self/task; 0 when they cannot be counted.
std::size_t thread_count() {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return ec ? 0 : n;
}

// The names of this process's threads (/proc/self/task/*/comm), for a refusal to say which ran.
std::string thread_names() {
  std::string names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::FILE* f = std::fopen((it->path() / "comm").c_str(), "r");
    char name[64] = {};
    if (f) {
      if (!std::fgets(name, sizeof name, f)) name[0] = 0;
      std::fclose(f);
    }
    std::string n(name);
    if (!n.empty() && n.back() == '\n') n.pop_back();
    names += (names.empty() ? "" : ", ") + (n.empty() ? std::string("?") : n);
  }
  return names;
}

// Why this process must not fork now, or empty. fork() copies only the calling thread: another thread's
// locks would stay locked in the child forever.
std::string why_not_fork(const std::vector<int>& passed) {
  if (passed.size() != kForkDescriptors)
    return "the fork request came with " + std::to_string(passed.size()) + " descriptors, not " +
           std::to_string(kForkDescriptors);
  const std::size_t threads = thread_count();
  if (threads == 0) return "it cannot count its threads (/proc/self/task)";
  if (threads != 1)
    return "it runs " + std::to_string(threads) + " threads (" + thread_names() +
           "), and a forked child would get only one";
  return {};
}

// Forked children are reaped by the kernel as they end, whether or not this process is busy.
void reap_children_automatically() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  action.sa_flags = SA_NOCLDWAIT;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGCHLD, &action, nullptr);
}

// With SA_NOCLDWAIT, waitpid reports no child until all have ended, then ECHILD.
void wait_for_children() {
  const auto deadline = std::chrono::steady_clock::now() + kForkedChildrenGrace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// A zygote as its worker knows it.
struct Zygote {
  pid_t pid = -1;
  int socket = -1;  // the worker's end of their socket pair
};

// One process's serving of one channel: a worker's, started from the executable or forked.
class Server {
 public:
  Server(int in, int out, const CompileStages& stages, bool zygotes, std::set<std::string> families)
      : in_(in), out_(out), stages_(stages), zygotes_enabled_(zygotes), families_(std::move(families)) {}

  int run() {
    if (const auto w = write_frame(out_, encode_hello({::getpid(), kCacheFormatVersion})); w.status != IoStatus::ok)
      return quit("sending hello: " + w.error);
    for (;;) {
      std::vector<int> passed;  // descriptors that came with the frame; only a fork request may bring any
      const FrameRead read = read_frame(in_, {}, &passed);
      if (read.status == IoStatus::end_of_stream) {
        close_all(passed);
        for (auto& [family, zygote] : zygotes_) ::close(zygote.socket);  // they end at the end of theirs
        zygotes_.clear();
        if (has_children_) wait_for_children();
        return 0;
      }
      if (read.status != IoStatus::ok) return close_all(passed), quit("reading a request: " + read.error);
      const auto message = open_frame(read.frame);
      if (!message.ok()) return close_all(passed), quit("reading a request: " + message.error());

      if (message->kind == MessageKind::fork) {
        const auto family = decode_fork(message->body);
        if (!family.ok()) return close_all(passed), quit(family.error());
        const Forked forked = fork_for((*family), passed);
        close_all(passed);  // closed before answering: the host takes the child's open input as its life sign
        if (const auto w = write_frame(out_, encode_forked(forked)); w.status != IoStatus::ok)
          return quit("answering a fork request: " + w.error);
        continue;
      }

      close_all(passed);
      if (message->kind != MessageKind::request)
        return quit("expected a request, got message kind " + std::to_string(static_cast<unsigned>(message->kind)));
      const auto request = decode_request(message->body);
      if (!request.ok()) return quit(request.error());
      if (const auto w = write_frame(out_, answer((*request))); w.status != IoStatus::ok)
        return quit("sending the outcome of unit " + request->unit + ": " + w.error);
    }
  }

 private:
  std::string answer(const CompileRequest& request) {
    try {
      PtxStage stage = stages_.ptx(request);
      if (stage.outcome.entry) make_zygote(pch_family(request));
      return encode_outcome(stages_.link(request, std::move(stage)));
    } catch (const kiln::Error& e) {
      return encode_failure({true, static_cast<std::uint32_t>(e.code()), e.what()});
    } catch (const std::exception& e) {
      return encode_failure({false, 0, e.what()});
    }
  }

  void adopt_children() {
    if (!has_children_) reap_children_automatically();
    has_children_ = true;
  }

  // After the NVRTC stage of a request of `family`: a zygote, if the family is new to this process and
  // it runs one thread. In the zygote, never returns.
  void make_zygote(const std::string& family) {
    if (!zygotes_enabled_ || family.empty() || !families_.insert(family).second || thread_count() != 1) return;
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return;  // forks directly, while it can
    adopt_children();
    const pid_t worker = ::getpid();
    std::fflush(nullptr);  // nothing buffered may be written twice
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The zygote: nothing of the worker's but the warm NVRTC state and its own end of the pair.
      private_pch_dirs_after_fork();
      ::close(ends[0]);
      drop_channels();
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != worker) {  // the worker ended already
        remove_private_pch_dirs();
        std::_Exit(0);
      }
      std::exit(serve_as_zygote(ends[1], family));
    }
    ::close(ends[1]);
    if (pid < 0) {
      ::close(ends[0]);
      return;
    }
    zygotes_[family] = {pid, ends[0]};
  }

  // A forked process's parent's channels: the host's, and the worker's zygotes' sockets.
  void drop_channels() {
    ::close(in_);
    ::close(out_);
    in_ = out_ = -1;
    for (auto& [f, zygote] : zygotes_) ::close(zygote.socket);
    zygotes_.clear();
    has_children_ = false;
  }

  // A zygote's loop: each fork request on `socket` forks a worker that serves the passed channel. It
  // runs no compile, so it stays single-threaded. Returns its exit code at the end of `socket`.
  int serve_as_zygote(int socket, const std::string& family) {
    for (;;) {
      std::vector<int> passed;
      const FrameRead read = read_frame(socket, {}, &passed);
      if (read.status == IoStatus::end_of_stream) {
        close_all(passed);
        if (has_children_) wait_for_children();
        return 0;
      }
      if (read.status != IoStatus::ok) return close_all(passed), quit("zygote: reading a fork request: " + read.error);
      const auto message = open_frame(read.frame);
      if (!message.ok()) return close_all(passed), quit("zygote: reading a fork request: " + message.error());
      if (message->kind != MessageKind::fork)
        return close_all(passed), quit("zygote: expected a fork request, got message kind " +
                                       std::to_string(static_cast<unsigned>(message->kind)));
      const auto asked = decode_fork(message->body);
      Forked forked;
      if (!asked.ok()) forked.error = "zygote: " + asked.error();
      else if ((*asked) != family) forked.error = "the zygote holds another PCH family";
      else forked.error = why_not_fork(passed);
      if (forked.error.empty()) {
        adopt_children();
        std::fflush(nullptr);
        const pid_t pid = ::fork();
        if (pid == 0) {
          private_pch_dirs_after_fork();
          ::close(socket);
          has_children_ = false;
          std::exit(Server(passed[0], passed[1], stages_, zygotes_enabled_, families_).run());
        }
        if (pid < 0) forked.error = std::string("fork: ") + std::strerror(errno);
        else forked.pid = pid;
      }
      close_all(passed);
      if (const auto w = write_frame(socket, encode_forked(forked)); w.status != IoStatus::ok) {
        if (has_children_) wait_for_children();
        return quit("zygote: answering a fork request: " + w.error);
      }
    }
  }

  // A fork request of the host's: through the family's zygote if there is one, else directly.
  Forked fork_for(const std::string& family, std::vector<int>& passed) {
    if (const auto it = zygotes_.find(family); it != zygotes_.end()) return through_zygote(it, passed);
    Forked forked;
    forked.error = why_not_fork(passed);
    if (!forked.error.empty()) {
      if (!family.empty() && zygotes_enabled_) forked.error += ", and it has no zygote of the family";
      return forked;
    }
    adopt_children();
    std::fflush(nullptr);  // nothing buffered may be written twice
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The child: serve the new channel; the old ones stay the parent's alone.
      private_pch_dirs_after_fork();
      drop_channels();
      std::exit(Server(passed[0], passed[1], stages_, zygotes_enabled_, families_).run());
    }
    if (pid < 0) forked.error = std::string("fork: ") + std::strerror(errno);
    else forked.pid = pid;
    return forked;
  }

  // Forwards the request, descriptors and all, and relays the answer. A zygote that fails is forgotten.
  Forked through_zygote(std::map<std::string, Zygote>::iterator it, const std::vector<int>& passed) {
    Forked forked;
    if (passed.size() != kForkDescriptors) {
      forked.error = "the fork request came with " + std::to_string(passed.size()) + " descriptors, not " +
                     std::to_string(kForkDescriptors);
      return forked;
    }
    const Zygote zygote = it->second;
    std::string problem;
    if (const auto w = write_frame_passing(zygote.socket, encode_fork(it->first), passed); w.status != IoStatus::ok) {
      problem = "it stopped reading (" + w.error + ")";
    } else if (const FrameRead read = read_frame(zygote.socket); read.status != IoStatus::ok) {
      problem = read.status == IoStatus::end_of_stream ? "it ended without answering" : "reading its answer: " + read.error;
    } else if (const auto message = open_frame(read.frame); !message.ok()) {
      problem = message.error();
    } else if (message->kind != MessageKind::forked) {
      problem = "it answered with message kind " + std::to_string(static_cast<unsigned>(message->kind));
    } else if (auto answer = decode_forked(message->body); !answer.ok()) {
      problem = answer.error();
    } else {
      return (*answer);
    }
    ::close(zygote.socket);
    zygotes_.erase(it);
    forked.error = "its zygote pid " + std::to_string(zygote.pid) + " of the family failed: " + problem;
    return forked;
  }

  int in_, out_;
  const CompileStages& stages_;
  bool zygotes_enabled_;
  std::set<std::string> families_;          // PCH families whose NVRTC stage ran here (or in an ancestor)
  std::map<std::string, Zygote> zygotes_;   // by family
  bool has_children_ = false;
};

}  // namespace

CompileStages nvrtc_stages() { return {&nvrtc_stage, &link_stage}; }

int serve_compile_requests(int in, int out, const CompileStages& stages, bool zygotes) {
  if (out == STDOUT_FILENO) {
    out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return quit("cannot move the frame stream off stdout");
  }
  return Server(in, out, stages, zygotes, {}).run();
}

}  // namespace kiln::detail
