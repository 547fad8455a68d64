// Runs a program as a real process (fork + execve), with its own environment, and collects its exit status
// and output, within a time limit.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern char** environ;

namespace kiln::test {

struct ProcessResult {
  int status = -1;     // the exit code, or -signal; -1000 when it ran past the limit and was killed
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs `argv` with this process's environment changed by `env` (a value of nullopt unsets the variable),
// after `in_child` (e.g. dropping privileges) in the child. Killed after `limit`.
inline ProcessResult run_process(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::optional<std::string>>& env = {},
                                 std::chrono::seconds limit = std::chrono::seconds(120),
                                 const std::function<bool()>& in_child = {}) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, value] : env) {
    if (value) vars[name] = *value;
    else vars.erase(name);
  }
  std::vector<std::string> envp_strings;
  for (const auto& [name, value] : vars) envp_strings.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : envp_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  ProcessResult r;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    if (in_child && !in_child()) ::_exit(126);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool killed = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000))) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n <= 0) break;
    r.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.status = killed ? -1000 : WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return r;
}

}  // namespace kiln::test
