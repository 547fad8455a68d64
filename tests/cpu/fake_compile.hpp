// tests/cpu/fake_compile.hpp — a compile function without NVRTC for the pool tests, steered by "fake:" options.
//
// It runs in the fake worker (fake_jitd.cpp) and, as the in-process fallback, in the test itself.
// Options of the request select what it does (the first "fake:" option wins):
//   (none)                   echo: ok, entry.cubin = source, entry.kernels = kernels, log = "pid=<its pid>"
//   fake:gather=<dir>:<n>    marks <dir>/<pid>, waits until <n> marks exist (so n requests run at once), echoes
//   fake:hang=<dir>:<k>      marks <dir>/<pid>; while at most <k> marks exist it hangs (for the test to kill
//                            it), else echoes: the first k attempts hang, the next one answers
//   fake:throw               throws kiln::Error(Errc::driver, "fake: thrown in <pid>")
#pragma once

#include "jit_compile.hpp"

#include <kiln/error.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

namespace kiln::test {

inline std::size_t count_files(const std::filesystem::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    ++n;
  return n;
}

// "<dir>:<n>" of a "fake:<mode>=<dir>:<n>" option.
struct DirAndCount {
  std::filesystem::path dir;
  std::size_t count = 0;
};
inline DirAndCount dir_and_count(std::string_view arg) {
  const auto colon = arg.rfind(':');
  return {std::string(arg.substr(0, colon)), std::stoul(std::string(arg.substr(colon + 1)))};
}

inline void mark(const std::filesystem::path& dir) { std::ofstream(dir / std::to_string(::getpid())).put('x'); }

inline detail::CompileOutcome fake_echo(const detail::CompileRequest& request) {
  detail::CompileOutcome o;
  o.ok = true;
  o.entry.arch = request.arch;
  o.entry.kernels = request.kernels;
  o.entry.compiler = "fake";
  o.entry.cubin = request.source;
  o.log = "pid=" + std::to_string(::getpid());
  return o;
}

inline detail::CompileOutcome fake_compile(const detail::CompileRequest& request) {
  for (const std::string& option : request.options) {
    const std::string_view o = option;
    if (o.starts_with("fake:gather=")) {
      const auto [dir, n] = dir_and_count(o.substr(12));
      mark(dir);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (count_files(dir) < n) {
        if (std::chrono::steady_clock::now() > deadline) {
          detail::CompileOutcome timed_out;
          timed_out.error = "fake: only " + std::to_string(count_files(dir)) + " of " + std::to_string(n) +
                            " requests ran at once";
          return timed_out;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      return fake_echo(request);
    }
    if (o.starts_with("fake:hang=")) {
      const auto [dir, k] = dir_and_count(o.substr(10));
      mark(dir);
      while (count_files(dir) <= k) ::pause();  // until killed
      return fake_echo(request);
    }
    if (o == "fake:throw") throw kiln::Error(kiln::Errc::driver, "fake: thrown in " + std::to_string(::getpid()));
  }
  return fake_echo(request);
}

// The pid in a fake outcome's log.
inline long served_by(const detail::CompileOutcome& o) {
  return o.log.starts_with("pid=") ? std::stol(o.log.substr(4)) : -1;
}

}  // namespace kiln::test
