// The JIT tier's cold compile of 16 CUB-heavy units plus the example units for sm_90:
// wall time with 1, 2, 4, 8 and 16 worker processes, 16 without PCH files (KILN_JIT_PCH=0), 16
// in-process threads; each unit alone in a new process (the slowest, T: the whole set cannot end sooner),
// and per-unit NVRTC time without and with a PCH file. Needs no GPU (NVRTC only). Prints one
// Markdown table. `bench_jit_scaling 1 2` runs only those worker counts (and the rows for 2).
#include <kiln/kiln.hpp>

#include "bench_cub_catalog.hpp"
#include "examples_catalog.hpp"
#include "jit/compiler/compile.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/pool.hpp"
#include "jit/jit_tier.hpp"

#include "bench_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

constexpr unsigned kArch = 90;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

const kiln::Catalog& registry(std::size_t i) { return i == 0 ? kiln::bench_cub::catalog() : kiln::examples::catalog(); }

// `--child STAMP JOBS`: precompile both registries for sm_90 into $KILN_CACHE_DIR; prints wall ms, units,
// failures, how many workers were started, PCH files built and used.
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
  const double ms = ms_since(start);
  const kiln::detail::JitPoolStats pool = kiln::detail::jit_pool_stats();
  std::printf("%.3f %d %d %llu %llu %llu\n", ms, units, failed, static_cast<unsigned long long>(pool.spawned),
              static_cast<unsigned long long>(pool.pch_created), static_cast<unsigned long long>(pool.pch_used));
  if (std::getenv("KILN_BENCH_VERBOSE"))
    std::fprintf(stderr, "pool: rejected %llu, waits %llu, background %llu, split %llu (beside others %llu), deaths %llu\n",
                 static_cast<unsigned long long>(pool.pch_rejected), static_cast<unsigned long long>(pool.pch_waits),
                 static_cast<unsigned long long>(pool.background), static_cast<unsigned long long>(pool.split_links),
                 static_cast<unsigned long long>(pool.split_critical), static_cast<unsigned long long>(pool.deaths));
  return failed ? 1 : 0;
}

// `--alone STAMP REGISTRY UNIT`: that unit alone, precompiled for sm_90 into $KILN_CACHE_DIR; prints wall ms.
int alone(std::size_t registry_index, std::size_t unit) {
  const kiln::Catalog& c = registry(registry_index);
  std::string kernel;
  for (const auto& k : c.kernels)
    if (k.unit == unit && kernel.empty()) kernel = c.str(k.name);
  const auto start = std::chrono::steady_clock::now();
  const auto results = kiln::precompile(c, kArch, {kernel}, 0);
  const double ms = ms_since(start);
  if (results.size() != 1 || !results[0].ok) return 1;
  std::printf("%.3f\n", ms);
  return 0;
}

struct Run {
  double ms = -1;
  int started = 0, pch_created = 0, pch_used = 0;
};

// Runs `self --child STAMP jobs` with `env` (and no other KILN_* variable) in a new empty cache
// directory; returns its wall time in ms and its workers (ms -1 when it failed).
Run run_child(const char* self, unsigned jobs, std::vector<std::string> env) {
  const std::string dir = make_temp_dir("scaling");
  env.push_back("KILN_CACHE_DIR=" + dir);
  Run run;
  try {
    const auto out = run_children(self, {"--child", std::to_string(jobs)}, 1, 6, env, {}, true);
    run.ms = out[0][0];
    run.started = static_cast<int>(out[3][0]);
    run.pch_created = static_cast<int>(out[4][0]);
    run.pch_used = static_cast<int>(out[5][0]);

  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_scaling: run with %u jobs failed: %s\n", jobs, e.what());
  }
  remove_tree(dir);  // a worker may still be building a PCH in the background meanwhile
  return run;
}

void row(const std::string& how, const Run& run, double one) {
  std::printf("| %s | %.0f ms | %.2fx | %d | %d / %d |\n", how.c_str(), run.ms, one / run.ms, run.started,
              run.pch_created, run.pch_used);
  std::fflush(stdout);
}

// Per-unit NVRTC time of the 16 CUB units on one worker, all asked at once: with PCH files the first
// builds the family's PCH and the others read it.
std::vector<double> nvrtc_times(bool pch, const std::filesystem::path& base) {
  kiln::detail::JitPoolOptions options;
  options.workers = 1;
  options.pch_files = pch;
  kiln::detail::JitPool pool(options);
  const kiln::Catalog& c = kiln::bench_cub::catalog();
  std::vector<std::future<kiln::detail::CompileOutcome>> futures;
  for (std::uint32_t u = 0; u < c.units.size(); ++u) {
    auto request = kiln::detail::make_request(c, u, kArch);
    const std::string key = kiln::detail::pch_family(request, c.header_bundle_digest);
    futures.push_back(pool.submit(std::move(request), {key, kiln::detail::pch_path(base, key)}));
  }
  std::vector<double> times;
  for (auto& f : futures) {
    const auto outcome = f.get();
    if (!outcome.entry) std::fprintf(stderr, "%s\n%s\n", outcome.entry.error().c_str(), outcome.log.c_str());
    times.push_back(outcome.nvrtc_ms);
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--child") == 0) return child(static_cast<unsigned>(std::atoi(argv[3])));
  if (argc == 5 && std::strcmp(argv[1], "--alone") == 0)
    return alone(static_cast<std::size_t>(std::atoi(argv[3])), static_cast<std::size_t>(std::atoi(argv[4])));
  if (argc > 1 && std::atoi(argv[1]) == 0) {
    std::fprintf(stderr, "usage: %s [WORKERS...]   (default: 1 2 4 8 16)\n", argv[0]);
    return 2;
  }
  const unsigned units = static_cast<unsigned>(kiln::bench_cub::catalog().units.size() +
                                               kiln::examples::catalog().units.size());
  std::printf("kiln JIT scaling: %u units (%zu CUB-heavy + %zu examples) cold for sm_90, %u cores, each run a new "
              "process with an empty cache\n\n",
              units, kiln::bench_cub::catalog().units.size(), kiln::examples::catalog().units.size(),
              std::thread::hardware_concurrency());
  std::vector<unsigned> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(static_cast<unsigned>(std::atoi(argv[i])));
  if (counts.empty()) counts = {1, 2, 4, 8, 16};
  std::printf("| how | wall | speed-up vs %u worker%s | workers | PCH built / used |\n|---|---:|---:|---:|---:|\n",
              counts.front(), counts.front() == 1 ? "" : "s");
  std::fflush(stdout);
  const unsigned most = *std::max_element(counts.begin(), counts.end());
  double one = 0;
  Run widest;
  for (unsigned n : counts) {
    const Run run = run_child(argv[0], n, {"KILN_JIT_WORKERS=" + std::to_string(n)});
    if (one == 0) one = run.ms;
    if (n == most) widest = run;
    row(std::to_string(n) + " worker process" + (n == 1 ? "" : "es"), run, one);
  }
  // No PCH files at all.
  const std::string workers = "KILN_JIT_WORKERS=" + std::to_string(most);
  row(std::to_string(most) + " worker processes, no PCH files (KILN_JIT_PCH=0)",
      run_child(argv[0], most, {workers, "KILN_JIT_PCH=0"}), one);
  // No worker executable: the pool compiles in-process, on threads.
  row(std::to_string(most) + " in-process threads",
      run_child(argv[0], most, {workers, "KILN_JITD=/nonexistent/kiln-jitd"}), one);
  // T: each unit alone in a new process with an empty cache (ptxas may use the free cores); the whole
  // set cannot end before its slowest unit does.
  double alone_ms = 0;
  std::string slowest;
  for (std::size_t i = 0; i < 2; ++i) {
    const kiln::Catalog& c = registry(i);
    for (std::size_t u = 0; u < c.units.size(); ++u) {
      const std::string dir = make_temp_dir("scaling");
      try {
        const double ms = run_children(argv[0], {"--alone", std::to_string(i), std::to_string(u)}, 1, 1,
                                       {workers, "KILN_CACHE_DIR=" + dir}, {}, true)[0][0];
        if (ms > alone_ms) {
          alone_ms = ms;
          slowest = std::string(c.name) + "." + std::string(c.str(c.units[u].name));
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "jit_scaling: unit %zu of %s alone failed: %s\n", u, std::string(c.name).c_str(), e.what());
      }
      remove_tree(dir);
    }
  }
  std::printf("| the slowest unit alone (%s), T | %.0f ms | | | |\n", slowest.c_str(), alone_ms);
  if (widest.ms > 0 && alone_ms > 0)
    std::printf("\nThe whole set with %u workers: %.0f ms = T x %.2f (T: each unit alone in a new process, the slowest)\n",
                most, widest.ms, widest.ms / alone_ms);

  const std::filesystem::path base = make_temp_dir("pch");
  const auto without = nvrtc_times(false, base);
  const auto with = nvrtc_times(true, base);
  remove_tree(base);
  std::printf("\nNVRTC time per CUB unit, 16 units on one worker: without PCH median %.0f ms; with PCH files first "
              "%.0f ms (builds the PCH), then median %.0f ms (%.2fx)\n",
              median(without), with.front(), median({with.begin() + 1, with.end()}),
              median(without) / median({with.begin() + 1, with.end()}));
  return 0;
}
