// Redis for the remote tier's tests: a real redis-server on a free 127.0.0.1 port (no persistence, stopped
// at the end, and killed with the test if that dies first), a plain client for looking inside it, and fake
// servers that accept connections and then never answer or answer garbage.
#pragma once

#include <kiln/remote.hpp>  // the fleet key's id, which names kiln's values in the store

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln::test {

// The fleet key every test process shares (any 16 bytes or more will do).
inline const std::string kFleetKey = "kiln-test-fleet-key-0123456789abcdef";

// The id of the fleet key `key` (nothing is connected: the URL only has to parse).
inline std::string fleet_key_id(const std::string& key) {
  RemoteConfig config;
  config.url = "redis://127.0.0.1:1/0";
  config.fleet_key = key;
  return RemoteCache(config).fleet_key_id();
}
// The names of a unit's entry and of its lease in the store, under the fleet key's id.
inline std::string entry_name(const std::string& hex, const std::string& key = kFleetKey) {
  return "kiln:" + fleet_key_id(key) + ":entry:" + hex;
}
inline std::string lease_name(const std::string& hex, const std::string& key = kFleetKey) {
  return "kiln:" + fleet_key_id(key) + ":lease:" + hex;
}

// redis-server's path, or "" when it is not installed (the tests are then skipped: scripts/setup.sh
// installs it, so CI runs them). KILN_TEST_REDIS_SERVER names one elsewhere (a machine without a package
// registry, with the Debian package unpacked somewhere).
inline std::string redis_server_path() {
  if (const char* given = std::getenv("KILN_TEST_REDIS_SERVER"); given != nullptr && ::access(given, X_OK) == 0) return given;
  for (const char* candidate : {"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server"})
    if (::access(candidate, X_OK) == 0) return candidate;
  return "";
}

// A port on 127.0.0.1 nothing listens on now (the kernel's pick; another process could take it before
// the server binds it, which Redis would then report).
inline unsigned free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) != 0)
    throw std::runtime_error("cannot find a free port on 127.0.0.1");
  ::close(fd);
  return ntohs(a.sin_port);
}

// A plain connection for tests to look into the server or change it behind kiln's back.
class RedisClient {
 public:
  explicit RedisClient(unsigned port) {
    const timeval tv{2, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", static_cast<int>(port), tv);
    if (c_ == nullptr || c_->err != 0) throw std::runtime_error("cannot connect to the test's redis-server");
    redisSetTimeout(c_, tv);
  }
  ~RedisClient() { redisFree(c_); }
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // The reply as text: a string's bytes, an integer's digits, a status, "(nil)", "ERR ..." for an error.
  std::string command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (r == nullptr) throw std::runtime_error(std::string("redis command failed: ") + c_->errstr);
    std::string out;
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS:
      case REDIS_REPLY_ERROR: out.assign(r->str, r->len); break;
      case REDIS_REPLY_INTEGER: out = std::to_string(r->integer); break;
      case REDIS_REPLY_NIL: out = "(nil)"; break;
      default: out = "(array of " + std::to_string(r->elements) + ")";
    }
    freeReplyObject(r);
    return out;
  }

 private:
  redisContext* c_ = nullptr;
};

// One redis-server for the lifetime of the object.
class RedisServer {
 public:
  // `extra` arguments go after kiln's (e.g. {"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"}).
  explicit RedisServer(const std::vector<std::string>& extra = {}) {
    const std::string server = redis_server_path();
    if (server.empty()) throw std::runtime_error("redis-server is not installed");
    char dir[] = "/tmp/kiln-redis-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = dir;
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      if (start(server, extra)) return;
    }
    throw std::runtime_error("redis-server did not start; its log: " + log());
  }

  ~RedisServer() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  unsigned port() const { return port_; }
  std::string url(const std::string& query = "") const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/0" + (query.empty() ? "" : "?" + query);
  }

  // SIGKILL, as a crash would end it.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // SIGTERM, and SIGKILL if it has not ended within 5 s.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
  }

  std::string log() const {
    std::ifstream in(dir_ / "redis.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  bool start(const std::string& server, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {server, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no", "--daemonize", "no", "--dir", dir_.string(),
                                     "--logfile", (dir_ / "redis.log").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that crashes takes its server with it
      if (::getppid() != parent) ::_exit(1);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // Ready when it answers PING; at most 5 s.
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      const timeval tv{0, 200000};
      redisContext* c = redisConnectWithTimeout("127.0.0.1", static_cast<int>(port_), tv);
      const bool up = c != nullptr && c->err == 0;
      redisFree(c);
      if (up) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    return false;
  }

  std::filesystem::path dir_;
  unsigned port_ = 0;
  pid_t pid_ = -1;
};

// The server the tests of one run share (started on first use, stopped at exit), or nullptr when
// redis-server is not installed. Tests start from an empty database: flush_shared_redis().
inline RedisServer* shared_redis() {
  static const std::unique_ptr<RedisServer> server =
      redis_server_path().empty() ? nullptr : std::make_unique<RedisServer>();
  return server.get();
}

// A server that accepts connections on a free 127.0.0.1 port and then, per mode, never answers (reads
// and keeps the connection), answers every request with bytes that are not Redis's protocol, or answers
// with a reply that does not end, sent until the client hangs up: a string announced as 10^9 bytes (at
// most 128 MiB of it), an array announced as 10^8 elements followed by integers (32 MiB of them), or an
// array of 1,000 strings of 60,000 bytes each.
class FakeServer {
 public:
  enum class Mode { silent, garbage, huge_value, endless_array, many_strings };

  explicit FakeServer(Mode mode) : mode_(mode) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof a;
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener_, 64) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &size) != 0)
      throw std::runtime_error("cannot listen on 127.0.0.1");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    for (const int fd : clients_) ::close(fd);
    ::close(listener_);
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  unsigned port() const { return port_; }
  std::string url(const std::string& query = "") const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/0" + (query.empty() ? "" : "?" + query);
  }
  std::size_t connections() const { return accepted_; }
  // huge_value: the bytes sent so far, and whether a client hung up (or all was sent).
  std::size_t sent() const { return sent_; }
  bool finished() const { return finished_; }

 private:
  // Polls every 50 ms, so that the destructor is never kept waiting longer.
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const int fd : clients_) fds.push_back({fd, static_cast<short>(POLLIN | (owed_ > 0 ? POLLOUT : 0)), 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          clients_.push_back(fd);
          ++accepted_;
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (owed_ > 0 && (fds[i].revents & POLLOUT)) {
          // The piece repeats: sent from where the last send stopped, so that elements stay whole.
          const std::string& piece = this->piece();
          const std::size_t at = sent_ % piece.size();
          const ssize_t n = ::send(fds[i].fd, piece.data() + at, std::min(piece.size() - at, owed_), MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n > 0) {
            owed_ -= static_cast<std::size_t>(n);
            sent_ += static_cast<std::size_t>(n);
            if (owed_ == 0) finished_ = true;
          } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            owed_ = 0;
            finished_ = true;
          }
        }
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        char buffer[4096];
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n <= 0) {  // the client hung up: forget it
          ::close(fds[i].fd);
          std::erase(clients_, fds[i].fd);
          if (owed_ > 0) {
            owed_ = 0;
            finished_ = true;
          }
        } else if (mode_ == Mode::huge_value || mode_ == Mode::endless_array || mode_ == Mode::many_strings) {
          const char* announce = mode_ == Mode::huge_value      ? "$1000000000\r\n"
                                 : mode_ == Mode::endless_array ? "*100000000\r\n"
                                                                : "*1000\r\n";
          (void)!::send(fds[i].fd, announce, std::strlen(announce), MSG_NOSIGNAL);
          // 32 MiB of integers: what a client without a bound would make of them stays under a few GB.
          owed_ = std::size_t{mode_ == Mode::endless_array ? 32u : 128u} << 20;
          sent_ = 0;
        } else if (mode_ == Mode::garbage) {
          static constexpr char kGarbage[] = "?this is not redis\r\n\x01\x02\x03";
          (void)!::send(fds[i].fd, kGarbage, sizeof kGarbage - 1, MSG_NOSIGNAL);
        }
      }
    }
  }

  // What follows the announcement, repeated.
  const std::string& piece() const {
    static const std::string kBytes(64 * 1024, 'x');
    static const std::string kIntegers = [] {
      std::string s;
      for (int i = 0; i < 16 * 1024; ++i) s += ":1\r\n";
      return s;
    }();
    static const std::string kString = "$60000\r\n" + std::string(60000, 'x') + "\r\n";
    return mode_ == Mode::endless_array ? kIntegers : mode_ == Mode::many_strings ? kString : kBytes;
  }

  Mode mode_;
  int listener_ = -1;
  unsigned port_ = 0;
  std::vector<int> clients_;  // the serving thread's only, until it has ended
  std::atomic<std::size_t> accepted_{0};
  std::size_t owed_ = 0;  // huge_value: bytes still to send (one client at a time)
  std::atomic<std::size_t> sent_{0};
  std::atomic<bool> finished_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kiln::test
