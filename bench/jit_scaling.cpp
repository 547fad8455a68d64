// bench/jit_scaling.cpp — the JIT tier's cold compile of 16 CUB-heavy units plus the example units for sm_90:
// wall time with 1, 2, 4, 8 and 16 worker processes next to 16 in-process threads, and per-unit NVRTC time
// without and with the automatic PCH. Needs no GPU (NVRTC only). Prints one Markdown table.
#include <kiln/kiln.hpp>

#include "bench_cub_catalog.hpp"
#include "examples_catalog.hpp"
#include "jit_compile.hpp"
#include "jit_tier.hpp"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

constexpr unsigned kArch = 90;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// `--child JOBS`: precompile both registries for sm_90 into $KILN_CACHE_DIR; prints wall ms and failures.
int child(unsigned jobs) {
  const auto start = std::chrono::steady_clock::now();
  // Both registries at once, sharing the process's worker pool: one after the other would add a
  // second round of compiles to the wall time.
  std::vector<kiln::PrecompileResult> results[2];
  std::thread examples([&] { results[1] = kiln::precompile(kiln::examples::catalog(), kArch, {}, jobs); });
  results[0] = kiln::precompile(kiln::bench_cub::catalog(), kArch, {}, jobs);
  examples.join();
  int failed = 0, units = 0;
  for (const auto& list : results) {
    for (const auto& r : list) {
      ++units;
      failed += !r.ok;
      if (!r.ok) std::fprintf(stderr, "%s\n", r.error.c_str());
    }
  }
  std::printf("%.3f %d %d\n", ms_since(start), units, failed);
  return failed ? 1 : 0;
}

// Runs `self --child jobs` with `env` added; returns its wall time in ms.
double run_child(const char* self, unsigned jobs, std::vector<std::string> env) {
  char dir_template[] = "/tmp/kiln-bench-scaling-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  env.push_back("KILN_CACHE_DIR=" + dir);
  std::vector<char*> envp;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_", 5) != 0) envp.push_back(*e);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string jobs_text = std::to_string(jobs);
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("--child"), jobs_text.data(), nullptr};
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid;
  const int spawned = posix_spawn(&pid, self, &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  char line[256] = {};
  FILE* out = fdopen(fds[0], "r");
  const bool got = out && std::fgets(line, sizeof line, out);
  if (out) fclose(out);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  std::error_code ignored;  // a worker that is still exiting may be removing its PCH file meanwhile
  std::filesystem::remove_all(dir, ignored);
  double ms = -1;
  int units = 0, failed = 0;
  if (spawned != 0 || !got || std::sscanf(line, "%lf %d %d", &ms, &units, &failed) != 3 || failed)
    std::fprintf(stderr, "jit_scaling: run with %u jobs failed: %s\n", jobs, line);
  return ms;
}

// Per-unit NVRTC time of the 16 CUB units compiled one after another in this process.
std::vector<double> nvrtc_times(bool pch, const std::filesystem::path& base) {
  std::vector<double> times;
  const kiln::Catalog& c = kiln::bench_cub::catalog();
  for (std::uint32_t u = 0; u < c.units.size(); ++u) {
    auto request = kiln::detail::make_request(c, u, kArch, base);
    if (!pch) request.pch_dir.clear();
    const auto outcome = kiln::detail::compile_unit(request);
    if (!outcome.ok) std::fprintf(stderr, "%s\n%s\n", outcome.error.c_str(), outcome.log.c_str());
    times.push_back(outcome.nvrtc_ms);
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(static_cast<unsigned>(std::atoi(argv[2])));
  const unsigned units = static_cast<unsigned>(kiln::bench_cub::catalog().units.size() +
                                               kiln::examples::catalog().units.size());
  std::printf("kiln JIT scaling: %u units (%zu CUB-heavy + %zu examples) cold for sm_90, %u cores, each run a new "
              "process with an empty cache\n\n",
              units, kiln::bench_cub::catalog().units.size(), kiln::examples::catalog().units.size(),
              std::thread::hardware_concurrency());
  std::printf("| how | wall | speed-up vs 1 worker |\n|---|---:|---:|\n");
  std::fflush(stdout);
  double one = 0;
  for (unsigned n : {1u, 2u, 4u, 8u, 16u}) {
    const double ms = run_child(argv[0], n, {"KILN_JIT_WORKERS=" + std::to_string(n)});
    if (n == 1) one = ms;
    std::printf("| %u worker process%s | %.0f ms | %.2fx |\n", n, n == 1 ? "" : "es", ms, one / ms);
  }
  // No worker executable: the pool compiles in-process, on 16 threads.
  const double threads = run_child(argv[0], 16, {"KILN_JIT_WORKERS=16", "KILN_JITD=/nonexistent/kiln-jitd"});
  std::printf("| 16 in-process threads | %.0f ms | %.2fx |\n", threads, one / threads);

  char dir_template[] = "/tmp/kiln-bench-pch-XXXXXX";
  const std::filesystem::path base = mkdtemp(dir_template);
  const auto without = nvrtc_times(false, base);
  const auto with = nvrtc_times(true, base);
  std::error_code ignored;
  std::filesystem::remove_all(base, ignored);
  std::printf("\nNVRTC time per CUB unit, 16 units in one process: without PCH median %.0f ms; with -pch first "
              "%.0f ms (builds the PCH), then median %.0f ms (%.2fx)\n",
              median(without), with.front(), median({with.begin() + 1, with.end()}),
              median(without) / median({with.begin() + 1, with.end()}));
  return 0;
}
