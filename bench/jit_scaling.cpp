// The JIT tier's cold compile of 16 CUB-heavy units plus the example units for sm_90: wall and CPU time
// with 1, 2, 4, 8 and 16 worker processes and with 16 in-process threads; then side by side, in rounds
// (KILN_BENCH_ROUNDS, 3), 16 workers with and without PCH files (KILN_JIT_PCH=0), with their malloc on
// 4 KiB pages, and every unit in a process of its own started at once (no pool), against the slowest unit
// alone in a new process (T: the whole set cannot end sooner; its median), alone on one thread and alone
// on 4 KiB pages; per-unit NVRTC time without and with a PCH file. Needs no GPU (NVRTC only). Prints
// Markdown tables. `bench_jit_scaling 1 2` runs only those worker counts (and the side-by-side rows for 2).
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>

#include "bench_cub_catalog.hpp"
#include "examples_catalog.hpp"
#include "jit/compiler/compile.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/pool.hpp"
#include "jit/pool/settings.hpp"
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"

#include "bench_util.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using kiln::bench::children_cpu_seconds;
using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::reap_orphans;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

constexpr unsigned kArch = 90;

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

const kiln::Catalog& registry(std::size_t i) { return i == 0 ? kiln::bench_cub::catalog() : kiln::examples::catalog(); }

// A unit of the set: (registry index, unit index).
using UnitRef = std::pair<std::size_t, std::size_t>;

std::vector<UnitRef> every_unit() {
  std::vector<UnitRef> units;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t u = 0; u < registry(i).units.size(); ++u) units.emplace_back(i, u);
  return units;
}

// "registry/unit", as the pool's trace names it.
std::string unit_label(UnitRef unit) {
  const kiln::Catalog& c = registry(unit.first);
  return std::string(c.name) + "/" + std::string(c.str(c.units[unit.second].name));
}

// `--alone`'s run of `unit` in a new process with `env` (and no other KILN_* variable): its wall ms and
// the time it ended.
std::vector<std::vector<double>> run_alone(const char* self, UnitRef unit, std::vector<std::string> env) {
  return run_children(self, {"--alone", std::to_string(unit.first), std::to_string(unit.second)}, 1, 2, std::move(env),
                      {}, true);
}

// `--child STAMP`: precompile both registries for sm_90 into $KILN_CACHE_DIR, every unit handed to the
// pool at once (as `kiln precompile` does without --jobs: the pool sees the whole table, and
// KILN_JIT_WORKERS bounds its workers); prints wall ms, units, failures, how many workers were started,
// PCH files built and used.
int child() {
  const auto start = std::chrono::steady_clock::now();
  // Both registries at once, sharing the process's worker pool: one after the other would add a
  // second round of compiles to the wall time.
  std::vector<kiln::PrecompileResult> results[2];
  std::thread examples([&] { results[1] = kiln::precompile(kiln::examples::catalog(), kArch, {}, 0); });
  results[0] = kiln::precompile(kiln::bench_cub::catalog(), kArch, {}, 0);
  examples.join();
  int failed = 0, units = 0;
  for (const auto& list : results) {
    for (const auto& r : list) {
      ++units;
      failed += !r.ok;
      if (!r.ok) std::fprintf(stderr, "%s\n", r.error.message.c_str());
    }
  }
  const double ms = ms_since(start);
  const kiln::detail::JitPoolStats pool = kiln::detail::jit_pool_stats();
  std::printf("%.3f %d %d %llu %llu %llu\n", ms, units, failed, static_cast<unsigned long long>(pool.spawned),
              static_cast<unsigned long long>(pool.pch_created), static_cast<unsigned long long>(pool.pch_used));
  if (std::getenv("KILN_BENCH_VERBOSE"))
    std::fprintf(stderr, "pool: rejected %llu, waits %llu, split %llu (beside others %llu), beyond the "
                 "workers %llu, deaths %llu\n",
                 static_cast<unsigned long long>(pool.pch_rejected), static_cast<unsigned long long>(pool.pch_waits),
                 static_cast<unsigned long long>(pool.split_links),
                 static_cast<unsigned long long>(pool.split_critical), static_cast<unsigned long long>(pool.beyond),
                 static_cast<unsigned long long>(pool.deaths));
  return failed ? 1 : 0;
}

// `--alone STAMP REGISTRY UNIT`: that unit alone, precompiled for sm_90 into $KILN_CACHE_DIR; prints wall
// ms and the time it ended (now_ms(), the clock every process shares).
int alone(std::size_t registry_index, std::size_t unit) {
  const kiln::Catalog& c = registry(registry_index);
  std::string kernel;
  for (const auto& k : c.kernels)
    if (k.unit == unit && kernel.empty()) kernel = c.str(k.name);
  const auto start = std::chrono::steady_clock::now();
  const auto results = kiln::precompile(c, kArch, {kernel}, 0);
  const double ms = ms_since(start);
  if (results.size() != 1 || !results[0].ok) return 1;
  std::printf("%.3f %.3f\n", ms, kiln::bench::now_ms());
  return 0;
}

// What the pool's trace (KILN_JIT_TRACE) of one run says: when the last request reached the pool, when
// the last compile started, and the longest compile (its unit, NVRTC and nvJitLink inside it).
struct TraceSummary {
  bool read = false;
  double last_queued = 0, last_start = 0, longest_ms = 0, longest_nvrtc = 0, longest_link = 0;
  std::string longest;
};

// The number after "KEY": in a JSON line the pool wrote (jit/pool/trace.cpp), or 0.
double json_number(const std::string& line, const std::string& key) {
  const std::size_t at = line.find("\"" + key + "\":");
  return at == std::string::npos ? 0 : std::strtod(line.c_str() + at + key.size() + 3, nullptr);
}

std::string json_text(const std::string& line, const std::string& key) {
  const std::size_t at = line.find("\"" + key + "\":\"");
  if (at == std::string::npos) return {};
  const std::size_t from = at + key.size() + 4;
  return line.substr(from, line.find('"', from) - from);
}

TraceSummary summarize_trace(const std::string& path) {
  TraceSummary t;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"event\":\"request\"") == std::string::npos) continue;
    t.read = true;
    const double start = json_number(line, "start"), ms = json_number(line, "end") - start;
    t.last_queued = std::max(t.last_queued, json_number(line, "queued"));
    t.last_start = std::max(t.last_start, start);
    if (ms > t.longest_ms) {
      t.longest_ms = ms;
      t.longest = json_text(line, "unit");
      t.longest_nvrtc = json_number(line, "nvrtc");
      t.longest_link = json_number(line, "link");
    }
  }
  return t;
}

struct Run {
  double ms = -1, cpu_s = 0;
  int started = 0, pch_created = 0, pch_used = 0;
  TraceSummary trace;
};

// Runs `self --child STAMP` with `env` (and no other KILN_* variable) in a new empty cache
// directory, with the pool's trace; returns its wall time in ms (-1 when it failed), its workers, and the
// CPU time of it and every worker it started (this process is their subreaper), waiting for any worker
// still ending so that the next run has the machine to itself.
Run run_child(const char* self, std::vector<std::string> env) {
  const std::string dir = make_temp_dir("scaling");
  const std::string trace = dir + "-trace.jsonl";
  env.push_back("KILN_CACHE_DIR=" + dir);
  env.push_back("KILN_JIT_TRACE=" + trace);
  Run run;
  reap_orphans();
  const double cpu_before = children_cpu_seconds();
  try {
    const auto out = run_children(self, {"--child"}, 1, 6, env, {}, true);
    run.ms = out[0][0];
    run.started = static_cast<int>(out[3][0]);
    run.pch_created = static_cast<int>(out[4][0]);
    run.pch_used = static_cast<int>(out[5][0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "jit_scaling: a run failed: %s\n", e.what());
  }
  reap_orphans();
  run.cpu_s = children_cpu_seconds() - cpu_before;
  run.trace = summarize_trace(trace);
  std::filesystem::remove(trace);
  remove_tree(dir);
  return run;
}

// Every unit of both registries in a process of its own (one worker, so one thread each), all started at
// once, each with its own empty cache and no PCH files: no pool shares or orders anything. Wall time from the first spawn
// to the last unit's end; the longest unit's own time.
Run one_process_per_unit(const char* self) {
  const std::vector<UnitRef> units = every_unit();
  std::vector<std::string> dirs;
  for (std::size_t k = 0; k < units.size(); ++k) dirs.push_back(make_temp_dir("scaling"));
  std::vector<std::vector<std::vector<double>>> out(units.size());
  Run run;
  reap_orphans();
  const double cpu_before = children_cpu_seconds();
  const double start = kiln::bench::now_ms();
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < units.size(); ++k) {
    threads.emplace_back([&, k] {
      try {
        out[k] = run_alone(self, units[k], {"KILN_JIT_WORKERS=1", "KILN_JIT_PCH=0", "KILN_CACHE_DIR=" + dirs[k]});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "jit_scaling: a unit's own process failed: %s\n", e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  reap_orphans();
  run.cpu_s = children_cpu_seconds() - cpu_before;
  bool all = true;
  for (std::size_t k = 0; k < units.size(); ++k) {
    if (out[k].empty()) {
      all = false;
      continue;
    }
    run.ms = std::max(run.ms, out[k][1][0] - start);
    if (out[k][0][0] > run.trace.longest_ms) {
      run.trace.longest_ms = out[k][0][0];
      run.trace.longest = unit_label(units[k]);
    }
  }
  if (!all) run.ms = -1;
  for (const auto& d : dirs) remove_tree(d);
  return run;
}

void row(const std::string& how, const Run& run, double one) {
  std::printf("| %s | %.0f ms | %.2fx | %d | %d / %d | %.1f s |\n", how.c_str(), run.ms, one / run.ms, run.started,
              run.pch_created, run.pch_used, run.cpu_s);
  std::fflush(stdout);
}

// The median run of `runs` (by wall time; failed runs last).
const Run& median_run(std::vector<Run>& runs) {
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) {
    return (a.ms < 0 ? 1e300 : a.ms) < (b.ms < 0 ? 1e300 : b.ms);
  });
  return runs[(runs.size() - 1) / 2];
}

// A side-by-side row: the median run's wall (the range), its CPU time, and what its trace says.
void round_row(const std::string& how, std::vector<Run> runs, double t) {
  const Run& m = median_run(runs);
  std::printf("| %s | %.0f ms (%.0f-%.0f) | %.2f | %.1f s | %d / %d |", how.c_str(), m.ms, runs.front().ms,
              runs.back().ms, t > 0 ? m.ms / t : 0.0, m.cpu_s, m.pch_created, m.pch_used);
  if (m.trace.read)
    std::printf(" %.0f ms | %.0f ms | %s: %.0f ms (NVRTC %.0f, nvJitLink %.0f) |\n", m.trace.last_queued,
                m.trace.last_start, m.trace.longest.c_str(), m.trace.longest_ms, m.trace.longest_nvrtc,
                m.trace.longest_link);
  else
    std::printf(" | | %s: %.0f ms |\n", m.trace.longest.c_str(), m.trace.longest_ms);
  std::fflush(stdout);
}

// One unit alone in a new process with an empty cache and `env` added, `runs` times; its wall times. No
// PCH files: the compile is cold either way; each run waits for the last worker to end.
std::vector<double> unit_alone(const char* self, UnitRef unit, int runs, std::vector<std::string> env) {
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    const std::string dir = make_temp_dir("scaling");
    try {
      std::vector<std::string> with = env;
      with.insert(with.end(), {"KILN_JIT_PCH=0", "KILN_CACHE_DIR=" + dir});
      times.push_back(run_alone(self, unit, with)[0][0]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "jit_scaling: unit %s alone failed: %s\n", unit_label(unit).c_str(), e.what());
    }
    reap_orphans();
    remove_tree(dir);
  }
  return times;
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
    const std::string key = kiln::detail::pch_family(request, c.header_bundle_digest, kiln::detail::worker_glibc_tunables());
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
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child();
  if (argc == 5 && std::strcmp(argv[1], "--alone") == 0)
    return alone(static_cast<std::size_t>(std::atoi(argv[3])), static_cast<std::size_t>(std::atoi(argv[4])));
  if (argc > 1 && std::atoi(argv[1]) == 0) {
    std::fprintf(stderr, "usage: %s [WORKERS...]   (default: 1 2 4 8 16; KILN_BENCH_ROUNDS: side-by-side rounds, 3)\n",
                 argv[0]);
    return 2;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // JIT workers outlive their process: their CPU time must count
  const unsigned units = static_cast<unsigned>(kiln::bench_cub::catalog().units.size() +
                                               kiln::examples::catalog().units.size());
  std::printf("kiln JIT scaling: %u units (%zu CUB-heavy + %zu examples) cold for sm_90, %u cores, each run a new "
              "process with an empty cache; CPU: that process and its workers\n\n",
              units, kiln::bench_cub::catalog().units.size(), kiln::examples::catalog().units.size(),
              std::thread::hardware_concurrency());
  std::vector<unsigned> counts;
  for (int i = 1; i < argc; ++i) counts.push_back(static_cast<unsigned>(std::atoi(argv[i])));
  if (counts.empty()) counts = {1, 2, 4, 8, 16};
  const char* rounds_text = std::getenv("KILN_BENCH_ROUNDS");
  const int rounds = std::max(1, rounds_text ? std::atoi(rounds_text) : 3);
  std::printf("| how | wall | speed-up vs %u worker%s | workers | PCH built / used | CPU |\n|---|---:|---:|---:|---:|---:|\n",
              counts.front(), counts.front() == 1 ? "" : "s");
  std::fflush(stdout);
  const unsigned most = *std::max_element(counts.begin(), counts.end());
  double one = 0;
  for (unsigned n : counts) {
    const Run run = run_child(argv[0], {"KILN_JIT_WORKERS=" + std::to_string(n)});
    if (one == 0) one = run.ms;
    row(std::to_string(n) + " worker process" + (n == 1 ? "" : "es"), run, one);
  }
  // No worker executable: the pool compiles in-process, on threads.
  const std::string workers = "KILN_JIT_WORKERS=" + std::to_string(most);
  row(std::to_string(most) + " in-process threads", run_child(argv[0], {workers, "KILN_JITD=/nonexistent/kiln-jitd"}),
      one);

  // T: each unit alone in a new process with an empty cache (ptxas may use the free cores); the whole set
  // cannot end before its slowest unit does. The slowest of one pass, then that unit again: the median.
  double first_pass = 0;
  UnitRef slow{0, 0};
  for (const UnitRef& unit : every_unit()) {
    const auto times = unit_alone(argv[0], unit, 1, {workers});
    if (!times.empty() && times[0] > first_pass) {
      first_pass = times[0];
      slow = unit;
    }
  }
  const std::string slowest = unit_label(slow);

  // Side by side, `rounds` rounds: kiln with PCH files, without, with its workers' malloc on 4 KiB pages
  // (kiln's workers use huge pages unless GLIBC_TUNABLES says otherwise: docs/DESIGN.md, "Huge pages in
  // the workers"), and every unit in its own process at once (no pool: what the machine gives 19
  // separate compiles started together).
  const std::string small_pages = "GLIBC_TUNABLES=glibc.malloc.hugetlb=0";
  std::vector<Run> with_pch, without_pch, small, separate;
  for (int r = 0; r < rounds; ++r) {
    with_pch.push_back(run_child(argv[0], {workers}));
    without_pch.push_back(run_child(argv[0], {workers, "KILN_JIT_PCH=0"}));
    small.push_back(run_child(argv[0], {workers, small_pages}));
    separate.push_back(one_process_per_unit(argv[0]));
  }
  const double t = median(unit_alone(argv[0], slow, rounds, {workers}));
  const double t1 = median(unit_alone(argv[0], slow, rounds, {"KILN_JIT_WORKERS=1"}));
  const double t_small = median(unit_alone(argv[0], slow, rounds, {workers, small_pages}));
  std::printf("\nSide by side, %d rounds (medians; the trace's columns from the median run, ms since its pool was made)\n\n"
              "| how | wall (range) | / T | CPU | PCH built / used | last request queued | last compile started | longest compile |\n"
              "|---|---:|---:|---:|---:|---:|---:|---|\n",
              rounds);
  round_row("kiln, " + std::to_string(most) + " worker processes", with_pch, t);
  round_row("kiln, " + std::to_string(most) + " worker processes, no PCH files (KILN_JIT_PCH=0)", without_pch, t);
  round_row("kiln, " + std::to_string(most) + " worker processes, malloc on 4 KiB pages (" + small_pages + ")", small, t);
  round_row("each unit in a process of its own (one thread), all at once", separate, t);
  std::printf("| the slowest unit alone (%s), T | %.0f ms | 1.00 | | | | | |\n", slowest.c_str(), t);
  std::printf("| that unit alone on one thread (KILN_JIT_WORKERS=1) | %.0f ms | %.2f | | | | | |\n", t1, t > 0 ? t1 / t : 0);
  std::printf("| that unit alone, malloc on 4 KiB pages | %.0f ms | %.2f | | | | | |\n", t_small, t > 0 ? t_small / t : 0);

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
