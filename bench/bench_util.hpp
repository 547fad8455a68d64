// What the start-up benchmarks share: a clock that crosses processes, medians, and
// running this program again as a child that prints one line of numbers.
#pragma once

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kiln::bench {

// CLOCK_MONOTONIC in ms: the same clock in every process, so a parent's spawn time stamp means
// something in the child.
inline double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Removes a cache directory a child used. Its JIT workers' forked processes may still be removing their
// private PCH directories inside it after the child ended, so a first pass can race with them: retry.
inline void remove_tree(const std::string& dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!ec && !std::filesystem::exists(dir, ec)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "warning: could not remove %s\n", dir.c_str());
}

// A new directory /tmp/kiln-bench-<what>-XXXXXX, or a runtime_error that says why there is none.
inline std::string make_temp_dir(const std::string& what) {
  std::string pattern = "/tmp/kiln-bench-" + what + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create " + pattern + ": " + std::strerror(errno) + " (is /tmp writable?)");
  return pattern;
}

// CPU seconds (user + system) of every descendant reaped so far.
inline double children_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Reaps every descendant that has ended, waiting at most ~5 s for the others: with this process their
// subreaper (prctl PR_SET_CHILD_SUBREAPER), JIT workers that outlive the process that started them come
// here, and their CPU time counts. Only while no run_children call is in flight: it would take that
// call's child.
inline void reap_orphans() {
  for (int i = 0; i < 500; ++i) {
    const pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid < 0) return;  // no children left (ECHILD)
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// This process's environment with `env` ("NAME=value") added, replacing the same names (with
// `only_env_kiln`, this process's own KILN_* variables left out), null-terminated for posix_spawn. The
// pointers are into environ and `env`, which must outlive them.
inline std::vector<char*> environment_with(std::vector<std::string>& env, bool only_env_kiln = false) {
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e) {
    if (only_env_kiln && std::strncmp(*e, "KILN_", 5) == 0) continue;
    const char* eq = std::strchr(*e, '=');
    const std::size_t name = eq ? static_cast<std::size_t>(eq - *e) + 1 : std::strlen(*e);
    bool replaced = false;
    for (const auto& mine : env) replaced = replaced || mine.compare(0, name, *e, name) == 0;
    if (!replaced) envp.push_back(*e);
  }
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  return envp;
}

// Runs `self args[0] STAMP args[1...]` `runs` times, STAMP being now_ms() at the spawn, with `env`
// ("NAME=value") added to this process's environment (replacing the same names; with `only_env_kiln`,
// this process's own KILN_* variables are left out, so that the children's settings are env's alone);
// each run must print one line of `fields` numbers and exit 0, else a runtime_error says which run
// failed. `while_running(pid)` is called on the parent's side while each child runs (it returns when
// the child has ended, e.g. after sampling its memory). Returns the numbers column by column.
inline std::vector<std::vector<double>> run_children(const char* self, std::vector<std::string> args, int runs,
                                                     int fields, std::vector<std::string> env = {},
                                                     const std::function<void(pid_t)>& while_running = {},
                                                     bool only_env_kiln = false) {
  std::vector<char*> envp = environment_with(env, only_env_kiln);

  std::vector<std::vector<double>> columns(fields);
  for (int r = 0; r < runs; ++r) {
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%.6f", now_ms());
    std::vector<char*> argv{const_cast<char*>(self), args[0].data(), stamp};
    for (std::size_t i = 1; i < args.size(); ++i) argv.push_back(args[i].data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid;
    if (posix_spawn(&pid, self, &actions, nullptr, argv.data(), envp.data()) != 0) throw std::runtime_error("spawn");
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    if (while_running) while_running(pid);
    char line[512] = {};
    FILE* out = fdopen(fds[0], "r");
    const bool got = std::fgets(line, sizeof line, out) != nullptr;
    fclose(out);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error(args[0] + " run " + std::to_string(r) + " failed: " + line);
    char* cursor = line;
    for (int f = 0; f < fields; ++f) columns[f].push_back(std::strtod(cursor, &cursor));
  }
  return columns;
}

}  // namespace kiln::bench
