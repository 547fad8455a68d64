// Servers for the remote tier's HTTP and S3 tests, each on a free 127.0.0.1 port, stopped at the end and
// killed with the test if that dies first: nginx serving a WebDAV-style tree over TLS (a certificate the
// test makes with the openssl command), tests/cpu/object_server.py (an S3 subset, and faults real
// servers do not make on demand), and npm's s3rver. The tests skip, exit 77, when the server's program is not installed.
#pragma once

#include "redis_server.hpp"  // free_port

#include <curl/curl.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef KILN_TEST_OBJECT_SERVER
#define KILN_TEST_OBJECT_SERVER "tests/cpu/object_server.py"
#endif

namespace kiln::test {

inline std::string first_executable(const char* variable, std::initializer_list<const char*> candidates) {
  if (const char* given = std::getenv(variable); given != nullptr && ::access(given, X_OK) == 0) return given;
  for (const char* candidate : candidates)
    if (::access(candidate, X_OK) == 0) return candidate;
  return "";
}

// Debian's nginx (its dav module takes PUT and DELETE), the openssl command, python3; "" when missing.
inline std::string nginx_path() { return first_executable("KILN_TEST_NGINX", {"/usr/sbin/nginx", "/usr/bin/nginx"}); }
inline std::string openssl_path() { return first_executable("KILN_TEST_OPENSSL", {"/usr/bin/openssl", "/usr/local/bin/openssl"}); }
// npm's s3rver (scripts/setup.sh installs it where npm is): a third-party S3 implementation.
inline std::string s3rver_path() { return first_executable("KILN_TEST_S3RVER", {"/usr/bin/s3rver", "/usr/local/bin/s3rver"}); }
inline std::string python_path() { return first_executable("KILN_TEST_PYTHON", {"/usr/bin/python3", "/usr/local/bin/python3"}); }

// A child process, killed (SIGKILL) and reaped when this goes; with the test's death too.
class Child {
 public:
  Child() = default;
  // Runs `args` with stdin from /dev/null; stdout into a pipe read by read_line() when `piped`, else /dev/null.
  Child(std::vector<std::string> args, bool piped) {
    int fds[2] = {-1, -1};
    if (piped && ::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDIN_FILENO);
      ::dup2(piped ? fds[1] : null, STDOUT_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (piped) {
      ::close(fds[1]);
      out_ = fds[0];
    }
  }
  Child(Child&& o) noexcept : pid_(o.pid_), out_(o.out_) { o.pid_ = -1, o.out_ = -1; }
  Child& operator=(Child&& o) noexcept {
    stop();
    std::swap(pid_, o.pid_);
    std::swap(out_, o.out_);
    return *this;
  }
  ~Child() { stop(); }

  bool running() { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }
  // A line of its stdout within `within`, or "" (it ended, or said nothing).
  std::string read_line(std::chrono::milliseconds within) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) break;
      if (c == '\n') return line;
      line += c;
    }
    return "";
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

// Whether something accepts connections on 127.0.0.1:port.
inline bool accepting(unsigned port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool up = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) ::close(fd);
  return up;
}

// A private directory, removed with what is in it.
class ScratchDir {
 public:
  ScratchDir() {
    char dir[] = "/tmp/kiln-http-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = dir;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// nginx serving DIR/www: /open/ takes GET, HEAD, PUT and DELETE from anyone; /auth/ the same with
// "Bearer rw-token", reads only with "Bearer ro-token" (403 on writes), nothing otherwise (401); /moved/
// redirects to /open/; /broken/ answers 503; /nodav/ is static (405 on PUT). Over TLS by default, with a
// certificate for 127.0.0.1 made here (ca_file() trusts it).
class NginxServer {
 public:
  explicit NginxServer(bool tls = true) : tls_(tls) {
    if (nginx_path().empty()) throw std::runtime_error("nginx is not installed");
    const auto& d = dir_.path();
    std::filesystem::create_directories(d / "www" / "open");
    std::filesystem::create_directories(d / "www" / "auth");
    std::filesystem::create_directories(d / "www" / "nodav");
    std::filesystem::create_directories(d / "tmp");
    if (tls_) make_certificate();
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      write_config();
      server_ = Child({nginx_path(), "-p", d.string(), "-c", (d / "nginx.conf").string(), "-e", (d / "error.log").string()},
                      false);
      for (int i = 0; i < 500 && server_.running(); ++i) {
        if (accepting(port_)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      server_.stop();
    }
    throw std::runtime_error("nginx did not start; its log: " + log());
  }

  unsigned port() const { return port_; }
  // The URL of a location ("open", "auth", ...), with `query` ("?ca_file=" is added for TLS).
  std::string url(const std::string& location, const std::string& query = "") const {
    std::string q = query;
    if (tls_) q = "ca_file=" + ca_file() + (q.empty() ? "" : "&" + q);
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + "/" + location +
           (q.empty() ? "" : "?" + q);
  }
  std::string ca_file() const { return (dir_.path() / "cert.pem").string(); }
  // Where the server keeps a location's objects.
  std::filesystem::path root(const std::string& location) const { return dir_.path() / "www" / location; }
  void kill() { server_.stop(); }
  std::string log() const {
    std::ifstream in(dir_.path() / "error.log");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  void make_certificate() {
    const auto& d = dir_.path();
    Child openssl({openssl_path(), "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                   "-keyout", (d / "key.pem").string(), "-out", (d / "cert.pem").string(), "-days", "2", "-subj",
                   "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"},
                  false);
    for (int i = 0; i < 1000 && openssl.running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!std::filesystem::exists(d / "cert.pem")) throw std::runtime_error("openssl made no certificate");
  }

  void write_config() {
    const std::string d = dir_.path().string();
    std::ofstream conf(dir_.path() / "nginx.conf", std::ios::trunc);
    // worker_connections as Debian's nginx.conf has it: a fleet of 16 processes keeps up to 16 connections
    // each, and a worker out of connections closes kept ones under its clients (a send on one then fails).
    conf << "daemon off;\nmaster_process off;\npid " << d << "/nginx.pid;\nerror_log " << d << "/error.log;\n"
         << "events { worker_connections 768; }\n"
         << "http {\n  access_log off;\n  default_type application/octet-stream;\n"
         << "  client_body_temp_path " << d << "/tmp/body;\n  proxy_temp_path " << d << "/tmp/proxy;\n"
         << "  fastcgi_temp_path " << d << "/tmp/fastcgi;\n  uwsgi_temp_path " << d << "/tmp/uwsgi;\n"
         << "  scgi_temp_path " << d << "/tmp/scgi;\n"
         << "  map $http_authorization $kiln_role { \"Bearer rw-token\" rw; \"Bearer ro-token\" ro; default none; }\n"
         << "  server {\n    listen 127.0.0.1:" << port_ << (tls_ ? " ssl" : "") << ";\n";
    if (tls_) conf << "    ssl_certificate " << d << "/cert.pem;\n    ssl_certificate_key " << d << "/key.pem;\n";
    conf << "    root " << d << "/www;\n    client_max_body_size 64m;\n"
         << "    location /open/ { dav_methods PUT DELETE; create_full_put_path on; }\n"
         << "    location /auth/ {\n      if ($kiln_role = none) { return 401; }\n"
         << "      set $kiln_call \"$kiln_role:$request_method\";\n"
         << "      if ($kiln_call ~ \"^ro:(PUT|DELETE)$\") { return 403; }\n"
         << "      dav_methods PUT DELETE; create_full_put_path on;\n    }\n"
         << "    location /moved/ { return 302 /open/; }\n    location /broken/ { return 503; }\n"
         << "    location /nodav/ { }\n  }\n}\n";
  }

  bool tls_;
  ScratchDir dir_;
  unsigned port_ = 0;
  Child server_;
};

// tests/cpu/object_server.py in a mode ("s3", "dribble", "truncated", "huge", "garbage", "silent").
class ObjectServer {
 public:
  static constexpr const char* kAccessKey = "kilntestaccesskey";
  static constexpr const char* kSecretKey = "kiln-test-secret-key";

  explicit ObjectServer(const std::string& mode = "s3") {
    if (python_path().empty()) throw std::runtime_error("python3 is not installed");
    server_ = Child({python_path(), KILN_TEST_OBJECT_SERVER, "--mode", mode}, true);
    const std::string line = server_.read_line(std::chrono::seconds(20));
    port_ = line.empty() ? 0u : static_cast<unsigned>(std::stoul(line));
    if (port_ == 0) throw std::runtime_error("tests/cpu/object_server.py did not start");
  }
  unsigned port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // s3://<bucket>/<prefix> at this server, with `query` after the region and endpoint.
  std::string s3_url(const std::string& bucket_prefix, const std::string& query = "") const {
    return "s3://" + bucket_prefix + "?region=us-east-1&endpoint=" + endpoint() + (query.empty() ? "" : "&" + query);
  }
  std::string http_url(const std::string& path, const std::string& query = "") const {
    return endpoint() + "/" + path + (query.empty() ? "" : "?" + query);
  }
  void kill() { server_.stop(); }

  // How many requests it has had (GET /__requests, not counted itself).
  long requests() const {
    CURL* c = curl_easy_init();
    std::string body;
    const std::string url = endpoint() + "/__requests";
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* u) {
      static_cast<std::string*>(u)->append(p, s * n);
      return s * n;
    });
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    const CURLcode rc = curl_easy_perform(c);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK || body.empty()) throw std::runtime_error("cannot ask the object server how many requests it had");
    return std::stol(body);
  }

 private:
  unsigned port_ = 0;
  Child server_;
};

// npm's s3rver with one bucket, kiln-cache, its objects in a directory of the test's. Its keys are
// S3RVER/S3RVER. What it does not do (3.7): verify signatures, or honour If-None-Match and If-Match on
// PUT; so it checks the requests' form and the answers' parsing, object_server.py the rest.
class S3rverServer {
 public:
  S3rverServer() {
    if (s3rver_path().empty()) throw std::runtime_error("s3rver is not installed");
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      server_ = Child({s3rver_path(), "-d", dir_.path().string(), "-a", "127.0.0.1", "-p", std::to_string(port_),
                       "--configure-bucket", "kiln-cache", "--silent"},
                      false);
      for (int i = 0; i < 2000 && server_.running(); ++i) {
        if (accepting(port_)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      server_.stop();
    }
    throw std::runtime_error("s3rver did not start");
  }
  std::string s3_url(const std::string& prefix) const {
    return "s3://kiln-cache/" + prefix + "?region=us-east-1&endpoint=http://127.0.0.1:" + std::to_string(port_);
  }

 private:
  ScratchDir dir_;
  unsigned port_ = 0;
  Child server_;
};

// A file of credentials for KILN_REMOTE_AUTH_FILE (RemoteConfig::auth_file), mode `mode`.
inline std::filesystem::path write_secret(const std::filesystem::path& path, const std::string& text, unsigned mode = 0600) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << text;
  }
  std::filesystem::permissions(path, static_cast<std::filesystem::perms>(mode));
  return path;
}

}  // namespace kiln::test
