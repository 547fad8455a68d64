// A compile function without NVRTC for the pool tests, steered by "fake:" options.
//
// It runs in the fake worker (fake_jitd.cpp) and, as the in-process fallback, in the test itself.
// Options of the request select what it does (the first "fake:" option that answers wins), and so do
// lines of its source that start with "fake:" (after the options): requests of one PCH family share
// their options.
//   (none)                   echo: ok, entry.cubin = source, entry.kernels = kernels,
//                            log = "pid=<its pid>\nthreads=<link_threads>"
//   fake:gather=<dir>:<n>    marks <dir>/<pid>, waits until <n> marks exist (so n requests run at once), echoes
//   fake:hang=<dir>:<k>      marks <dir>/<pid>; while at most <k> marks exist it hangs (for the test to kill
//                            it), else echoes: the first k attempts hang, the next one answers
//   fake:throw               throws kiln::Error(Errc::driver, "fake: thrown in <pid>")
//   fake:env=<NAME>          echoes, with "\nenv=<its value in the worker>" added to the log ("(unset)" if unset)
//   fake:umask               echoes, with "\numask=<the worker's umask, octal>" added to the log
//   fake:persona             echoes, with "\naslr=on" or "\naslr=off" (its personality) added to the log
//   fake:data_limit          echoes, with "\ndata_limit=<its RLIMIT_DATA in bytes, or none>" added to the log
//   fake:alloc=<bytes>       allocates that many bytes (never touched), then echoes: a compile that wants them
// A request that asks for a PCH gets one as NVRTC would: create writes a small fake PCH file to the
// request's path (outcome created); use reads it (used; failed when missing, rejected when not the
// fake's). fake:sleep takes a quarter of its time with a PCH and 1.6 times as long creating one.
//   fake:append=<file>       appends the unit's name and a newline to <file>, then goes on to the next control
//   fake:span=<file>         appends "+<unit>" to <file>, goes on to the next control, and appends "-<unit>" once
//                            that answered (so that a test sees which requests ran at the same time)
//   fake:wait=<file>         waits until <file> exists (at most 60 s), echoes
//   fake:sleep=<ms>          sleeps <ms> milliseconds, echoes: a compile that takes a while, to be killed in
#pragma once

#include "jit/compiler/compile.hpp"

#include <kiln/cache.hpp>
#include <kiln/error.hpp>

#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
  CacheEntry entry;
  entry.arch = request.arch;
  entry.kernels = request.kernels;
  entry.compiler = "fake";
  entry.cubin = request.source;
  o.entry = std::move(entry);
  o.log = "pid=" + std::to_string(::getpid()) + "\nthreads=" + std::to_string(request.link_threads);
  return o;
}

// The request's "fake:" controls: its options, then its source lines that start with "fake:".
inline std::vector<std::string> fake_controls(const detail::CompileRequest& request) {
  std::vector<std::string> controls = request.options;
  std::string_view source = request.source;
  while (!source.empty()) {
    const std::size_t eol = source.find('\n');
    const std::string_view line = source.substr(0, eol);
    if (line.starts_with("fake:")) controls.emplace_back(line);
    source = eol == std::string_view::npos ? std::string_view{} : source.substr(eol + 1);
  }
  return controls;
}

// Appends "-<unit>" to its file when it goes out of scope (fake:span).
struct SpanEnd {
  std::string file, unit;
  ~SpanEnd() {
    if (!file.empty()) std::ofstream(file, std::ios::app) << '-' << unit << '\n';
  }
};

inline detail::CompileOutcome fake_compile_controls(const detail::CompileRequest& request) {
  SpanEnd span;
  for (const std::string& option : fake_controls(request)) {
    const std::string_view o = option;
    if (o.starts_with("fake:span=")) {
      span.file = std::string(o.substr(10));
      span.unit = request.unit;
      std::ofstream(span.file, std::ios::app) << '+' << request.unit << '\n';
      continue;
    }
    if (o.starts_with("fake:gather=")) {
      const auto [dir, n] = dir_and_count(o.substr(12));
      mark(dir);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (count_files(dir) < n) {
        if (std::chrono::steady_clock::now() > deadline) {
          detail::CompileOutcome timed_out;
          timed_out.entry = detail::fail("fake: only " + std::to_string(count_files(dir)) + " of " +
                                         std::to_string(n) + " requests ran at once");
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
    if (o.starts_with("fake:append=")) {
      std::ofstream(std::string(o.substr(12)), std::ios::app) << request.unit << '\n';
      continue;
    }
    if (o.starts_with("fake:env=")) {
      detail::CompileOutcome o2 = fake_echo(request);
      const char* value = std::getenv(std::string(o.substr(9)).c_str());
      o2.log += "\nenv=" + std::string(value != nullptr ? value : "(unset)");
      return o2;
    }
    if (o == "fake:umask") {
      const mode_t mask = ::umask(0);
      ::umask(mask);
      detail::CompileOutcome o2 = fake_echo(request);
      char text[8];
      std::snprintf(text, sizeof text, "%03o", static_cast<unsigned>(mask));
      o2.log += std::string("\numask=") + text;
      return o2;
    }
    if (o == "fake:persona") {
      detail::CompileOutcome o2 = fake_echo(request);
      const int persona = ::personality(0xffffffff);
      o2.log += persona != -1 && (persona & ADDR_NO_RANDOMIZE) != 0 ? "\naslr=off" : "\naslr=on";
      return o2;
    }
    if (o == "fake:data_limit") {
      detail::CompileOutcome o2 = fake_echo(request);
      rlimit limit{};
      ::getrlimit(RLIMIT_DATA, &limit);
      o2.log += "\ndata_limit=" + (limit.rlim_cur == RLIM_INFINITY ? std::string("none") : std::to_string(limit.rlim_cur));
      return o2;
    }
    if (o.starts_with("fake:alloc=")) {
      const std::unique_ptr<char[]> bytes(new char[std::stoull(std::string(o.substr(11)))]);
      asm volatile("" : : "r"(bytes.get()) : "memory");  // kept (never elided); its pages are never touched
      return fake_echo(request);
    }
    if (o.starts_with("fake:fail_kernel=")) {  // a request with that kernel fails, with a log of its own
      const std::string_view name = o.substr(17);
      for (const auto& k : request.kernels) {
        if (k.name != name) continue;
        detail::CompileOutcome failed;
        failed.entry = detail::fail("fake: " + std::string(name) + " does not compile");
        failed.log = "the log of " + std::string(name);
        return failed;
      }
      continue;
    }
    if (o == "fake:throw") throw kiln::Error(kiln::Errc::driver, "fake: thrown in " + std::to_string(::getpid()));
    if (o.starts_with("fake:wait=")) {
      const std::filesystem::path file(o.substr(10));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!std::filesystem::exists(file) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return fake_echo(request);
    }
    if (o.starts_with("fake:sleep=")) {
      const double ms = std::stod(std::string(o.substr(11)));
      const double factor = request.pch == detail::PchMode::use ? 0.25 : request.pch == detail::PchMode::create ? 1.6 : 1.0;
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms * factor));
      return fake_echo(request);
    }
  }
  return fake_echo(request);
}

inline constexpr std::string_view kFakePch = "a fake precompiled header\n";

// fake_compile_controls, with a request's PCH handled as NVRTC would (see the top of this file).
inline detail::CompileOutcome fake_compile(const detail::CompileRequest& request) {
  detail::CompileOutcome o = fake_compile_controls(request);
  if (!o.entry && o.entry.error().empty()) o.entry = detail::fail("fake: failed");
  if (request.pch == detail::PchMode::create) {
    std::ofstream(request.pch_path, std::ios::binary) << kFakePch;
    o.pch = detail::PchResult::created;
  } else if (request.pch == detail::PchMode::use) {
    std::ifstream in(request.pch_path, std::ios::binary);
    const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    o.pch = !in.is_open() ? detail::PchResult::failed : content == kFakePch ? detail::PchResult::used
                                                                             : detail::PchResult::rejected;
  }
  return o;
}

// The pid of the process that compiled a fake outcome (its log says it).
inline long compiled_in(const detail::CompileOutcome& o) {
  return o.log.starts_with("pid=") ? std::stol(o.log.substr(4)) : -1;
}

// The threads the pool let the compilers use for a fake outcome's request (CompileRequest::link_threads).
inline long threads_of(const detail::CompileOutcome& o) {
  const std::size_t at = o.log.find("\nthreads=");
  return at == std::string::npos ? -1 : std::stol(o.log.substr(at + 9));
}

}  // namespace kiln::test
