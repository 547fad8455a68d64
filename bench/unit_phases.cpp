// Where a slow unit's cold compile goes, and what the host allows: for each named primitive (or example)
// unit (default: the slowest, segmented_sort_i32), compiled for sm_90 in this process by the JIT's own
// compiler (no pool, no PCH), medians of --reps:
//   - the unit's first compile in the process (the process's first, for the first unit named), and later
//     ones as kiln compiles it: NVRTC, then nvJitLink (ptxas) on one thread (with the minor page faults);
//   - NVRTC's optimizer on all threads (-split-compile=0), ptxas on all threads, and both;
//   - no kernel (the source with no name expression: parsing its headers) and each kernel alone (one
//     name expression): what splitting the unit could give;
//   - N copies compiled at once in N forked processes, and on a pool of N kiln-jitd workers: the
//     slowdown when every core is busy, the bar for any schedule of a table on N workers.
// With --table instead: the primitives' whole table (every kernel of every unit but the linked ones) cold
// on a fresh pool of kiln-jitd workers, as kiln::precompile hands it in (longest first, PCH files in a new
// cache directory each run), with units on its critical path split over workers (KILN_JIT_SPLIT=1) and
// whole (=0), alternating, medians of R rounds; beside them its slowest unit alone (T) and the slowest
// kernel of that unit alone, each on a pool of its own (docs/DESIGN.md, "A unit's kernels over several
// workers").
// Needs no GPU (NVRTC only).
// `bench_unit_phases [--reps R] [--copies 1,8,16] [--no-phases] [--no-kernels] [--first-only] [unit ...]`
// (--first-only: each unit's first compile alone, for comparing fresh processes; --copies none: no copies
// rows); `bench_unit_phases --table [--reps R] [unit]` (the unit: T's, else the longest estimate). It sets CUDA_CACHE_DISABLE=1 unless set: nvJitLink keeps ptxas's output in the driver's
// JIT cache (~/.nv/ComputeCache) and reads it back in later processes, which no cold compile may do.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/prim/common.hpp>

#include "examples_catalog.hpp"

#include "jit/compiler/compile.hpp"
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"
#include "jit/pool/pool.hpp"

#include "bench_util.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <string>
#include <vector>

namespace {

using kiln::bench::median;
using kiln::detail::CompileOutcome;
using kiln::detail::CompileRequest;

constexpr unsigned kArch = 90;

struct Times {
  double nvrtc = 0, link = 0, wall = 0;
  long faults = 0;  // minor page faults of this process during the compile
};

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One compile in this process; exits with a message when it fails (a benchmark of a failing compile
// means nothing).
Times compile_once(const CompileRequest& request) {
  const long faults = minor_faults();
  const auto start = std::chrono::steady_clock::now();
  const CompileOutcome out = kiln::detail::compile_unit(request);
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!out.entry) {
    std::fprintf(stderr, "bench_unit_phases: %s\n%s\n", out.entry.error().c_str(), out.log.c_str());
    std::exit(1);
  }
  return {out.nvrtc_ms, out.link_ms, wall, minor_faults() - faults};
}

Times median_of(const CompileRequest& request, int reps) {
  std::vector<double> nvrtc, link, wall, faults;
  for (int r = 0; r < reps; ++r) {
    const Times t = compile_once(request);
    nvrtc.push_back(t.nvrtc);
    link.push_back(t.link);
    wall.push_back(t.wall);
    faults.push_back(static_cast<double>(t.faults));
  }
  return {median(nvrtc), median(link), median(wall), static_cast<long>(median(faults))};
}

void row(const std::string& what, const Times& t, double base) {
  std::printf("| %s | %.1f ms | %.1f ms | %.1f ms | %.2f | %ld |\n", what.c_str(), t.nvrtc, t.link, t.wall,
              t.wall / base, t.faults);
  std::fflush(stdout);
}

struct Round {
  double each = 0;    // median compile
  double round = 0;   // all of them
  double faults = 0;  // median minor page faults of a compile (forked)
  double nvrtc = 0, link = 0;  // medians of NVRTC and nvJitLink (pool)
  unsigned long long workers = 0;  // kiln-jitd processes started (pool)
};

// `copies` processes forked at once, each compiling `request` once.
Round at_once(const CompileRequest& request, int copies) {
  std::vector<std::pair<pid_t, int>> children;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < copies; ++i) {
    int fds[2];
    if (pipe(fds) != 0) {
      std::perror("bench_unit_phases: pipe");
      std::exit(1);
    }
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("bench_unit_phases: fork (too many processes? try fewer --copies)");
      std::exit(1);
    }
    if (pid == 0) {
      close(fds[0]);
      const Times t = compile_once(request);
      const std::string line = std::to_string(t.wall) + " " + std::to_string(t.faults) + "\n";
      if (write(fds[1], line.data(), line.size()) < 0) _exit(1);
      _exit(0);
    }
    close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  std::vector<double> each, faults;
  for (const auto& [pid, fd] : children) {
    char line[64] = {};
    const ssize_t got = read(fd, line, sizeof line - 1);
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "bench_unit_phases: a forked compile failed\n");
      std::exit(1);
    }
    char* rest = nullptr;
    each.push_back(std::strtod(line, &rest));
    faults.push_back(std::strtod(rest, nullptr));
  }
  const double round = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {median(each), round, median(faults)};
}

// `copies` requests at once on a JIT pool of as many kiln-jitd workers (no PCH files): the median
// compile as the workers report it (NVRTC + nvJitLink) and the round's wall time.
Round on_pool(const CompileRequest& request, int copies) {
  kiln::detail::JitPoolOptions options;
  options.workers = static_cast<unsigned>(copies);
  options.pch_files = false;
  kiln::detail::JitPool pool(options);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<CompileOutcome>> futures;
  for (int i = 0; i < copies; ++i) futures.push_back(pool.submit(request));
  std::vector<double> each, nvrtc, link;
  for (auto& f : futures) {
    const CompileOutcome out = f.get();
    if (!out.entry) {
      std::fprintf(stderr, "bench_unit_phases: %s\n", out.entry.error().c_str());
      std::exit(1);
    }
    each.push_back(out.nvrtc_ms + out.link_ms);
    nvrtc.push_back(out.nvrtc_ms);
    link.push_back(out.link_ms);
  }
  const double round = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const auto workers = pool.stats().spawned;
  if (workers == 0) {
    std::fprintf(stderr, "bench_unit_phases: no kiln-jitd worker started, so the pool compiled in this process, where "
                         "NVRTC runs one compile at a time: build runtime/kiln-jitd (ninja -C BUILD runtime/kiln-jitd) "
                         "or set KILN_JITD to it\n");
  }
  return {median(each), round, 0, median(nvrtc), median(link), workers};
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Every outcome, or exit with the first failure's message.
void require_all(std::vector<std::future<CompileOutcome>>& futures) {
  for (auto& f : futures) {
    const CompileOutcome out = f.get();
    if (!out.entry) {
      std::fprintf(stderr, "bench_unit_phases: %s\n%s\n", out.entry.error().c_str(), out.log.c_str());
      std::exit(1);
    }
  }
}

struct TableRun {
  double ms = 0;
  unsigned long long split_units = 0, parts = 0;
  unsigned workers = 0;
};

// `units` of `catalog` cold on a fresh pool (KILN_JIT_WORKERS or the cores, PCH files in a new cache
// directory), handed in at once longest first as kiln::precompile does, with `split` on or off; a unit
// split or not as the pool decides. `workers`: 0 for the default.
TableRun cold_on_pool(const kiln::Catalog& catalog, const std::vector<std::uint32_t>& units, bool split,
                      unsigned workers = 0) {
  const std::string dir = kiln::bench::make_temp_dir("table");
  TableRun run;
  {
    kiln::CacheConfig config;
    config.dir = dir;
    kiln::DiskCache cache(config);
    kiln::detail::JitPoolOptions options;
    options.split = split ? kiln::detail::SplitMode::always : kiln::detail::SplitMode::off;
    options.workers = workers;
    kiln::detail::JitPool pool(options);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::future<CompileOutcome>> futures;
    for (const std::uint32_t u : units) {
      CompileRequest request = kiln::detail::make_request(catalog, u, kArch);
      kiln::detail::PchFamily family = kiln::detail::request_family(request, catalog.header_bundle_digest, cache);
      futures.push_back(pool.submit(std::move(request), std::move(family), kiln::detail::compile_estimate_ms(catalog, u),
                                    {catalog.units[u].splittable, kiln::detail::compile_shared_ms(catalog, u)}));
    }
    require_all(futures);
    run.ms = ms_since(start);
    run.split_units = pool.stats().split_units;
    run.parts = pool.stats().parts;
    run.workers = pool.max_workers();
  }
  kiln::bench::remove_tree(dir);
  return run;
}

// One request alone on a fresh pool of one worker (a fresh process: nothing compiled before), in ms.
double alone_on_pool(const CompileRequest& request) {
  kiln::detail::JitPoolOptions options;
  options.workers = 1;
  options.pch_files = false;
  options.split = kiln::detail::SplitMode::off;
  kiln::detail::JitPool pool(options);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<CompileOutcome>> futures;
  futures.push_back(pool.submit(request));
  require_all(futures);
  return ms_since(start);
}

// The primitives' table cold, split and whole, against its slowest unit (`slowest_name`, else the longest
// estimate: segmented_sort_i32 where the build embeds cubins to estimate from) and that unit's slowest
// kernel alone.
int table(int rounds, const std::string& slowest_name) {
  const kiln::Catalog& catalog = kiln::prim::catalog();
  std::vector<std::uint32_t> units;
  std::size_t kernels = 0;
  for (std::uint32_t u = 0; u < catalog.units.size(); ++u) {
    if (catalog.units[u].linked) continue;
    units.push_back(u);
    for (const auto& k : catalog.kernels) kernels += k.unit == u;
  }
  units = kiln::detail::longest_first(catalog, units);
  std::vector<double> split_ms, whole_ms;
  TableRun split_run;
  for (int r = 0; r < rounds; ++r) {
    // Alternating, so that a machine's drift weighs on both alike.
    split_run = cold_on_pool(catalog, units, true);
    split_ms.push_back(split_run.ms);
    whole_ms.push_back(cold_on_pool(catalog, units, false).ms);
  }
  // T: the unit the table's estimates end with, alone (threads as the pool gives a unit alone); its
  // kernels each alone on one thread, the slowest of them the bound a split table can reach.
  std::uint32_t slowest = units.front();
  for (const std::uint32_t u : units)
    if (catalog.str(catalog.units[u].name) == slowest_name) slowest = u;
  const std::vector<std::uint32_t> alone{slowest};
  std::vector<double> unit_ms;
  for (int r = 0; r < rounds; ++r) unit_ms.push_back(cold_on_pool(catalog, alone, false).ms);
  const CompileRequest request = kiln::detail::make_request(catalog, slowest, kArch);
  double kernel_ms = 0;
  std::string kernel_name;
  for (std::size_t k = 0; k < request.kernels.size(); ++k) {
    const auto part = kiln::detail::part_request(request, {k});
    if (!part) {
      std::fprintf(stderr, "bench_unit_phases: kernel %zu of the slowest unit: %s\n", k, part.error().c_str());
      return 1;
    }
    std::vector<double> each;
    for (int r = 0; r < rounds; ++r) each.push_back(alone_on_pool(*part));
    if (median(each) > kernel_ms) kernel_ms = median(each), kernel_name = request.kernels[k].name;
  }
  const double split = median(split_ms), whole = median(whole_ms);
  std::printf("\nthe primitives' table cold through the JIT: %zu kernels in %zu units, sm_%u, a fresh pool of %u "
              "workers and cache directory each run, medians of %d (alternating)\n\n",
              kernels, units.size(), kArch, split_run.workers, rounds);
  std::printf("| how | ms | / slowest kernel alone | units split (parts) |\n|---|---:|---:|---:|\n");
  std::printf("| the table, critical units split over workers (KILN_JIT_SPLIT=1) | %.1f | %.2f | %llu (%llu) |\n", split,
              split / kernel_ms, split_run.split_units, split_run.parts);
  std::printf("| the table, every unit whole (KILN_JIT_SPLIT=0) | %.1f | %.2f | 0 |\n", whole, whole / kernel_ms);
  std::printf("| its slowest unit alone, whole (T): %s | %.1f | %.2f | |\n", std::string(catalog.str(catalog.units[slowest].name)).c_str(),
              median(unit_ms), median(unit_ms) / kernel_ms);
  std::printf("| its slowest kernel alone, one worker: %s | %.1f | 1.00 | |\n", kernel_name.c_str(), kernel_ms);
  std::fflush(stdout);
  return 0;
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;  // "" or "none": no copies rows
  if (std::strcmp(text, "none") == 0) return out;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0) {
      std::fprintf(stderr, "bench_unit_phases: --copies takes a list like 1,8,16\n");
      std::exit(2);
    }
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  setenv("CUDA_CACHE_DISABLE", "1", 0);  // before nvJitLink loads; the pool's workers inherit it
  int reps = 3;
  bool phases = true, kernels = true, first_only = false, whole_table = false;
  std::vector<int> copies{1, 8, 16};
  std::vector<std::string> units;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--copies") == 0 && i + 1 < argc) copies = parse_list(argv[++i]);
    else if (std::strcmp(argv[i], "--no-phases") == 0) phases = false;
    else if (std::strcmp(argv[i], "--first-only") == 0) first_only = true;
    else if (std::strcmp(argv[i], "--no-kernels") == 0) kernels = false;
    else if (std::strcmp(argv[i], "--table") == 0) whole_table = true;
    else units.emplace_back(argv[i]);
  }
  if (whole_table) return table(reps, units.empty() ? std::string() : units.front());
  if (units.empty()) units.emplace_back("segmented_sort_i32");
  for (const std::string& name : units) {
    // A primitive's unit, or an example's (vector_add, block_sum_f32: bench_tiers' kernels).
    const kiln::Catalog* found = nullptr;
    std::uint32_t index = 0;
    for (const kiln::Catalog* c : {&kiln::prim::catalog(), &kiln::examples::catalog()}) {
      for (std::uint32_t u = 0; u < c->units.size() && found == nullptr; ++u) {
        if (c->str(c->units[u].name) == name) found = c, index = u;
      }
    }
    if (found == nullptr) {
      std::fprintf(stderr, "bench_unit_phases: neither the primitives nor the examples have a unit '%s'\n", name.c_str());
      return 2;
    }
    const kiln::Catalog& catalog = *found;
    const CompileRequest request = kiln::detail::make_request(catalog, index, kArch);
    // The unit's first compile here: for the first unit named, the process's first (NVRTC's and
    // nvJitLink's first use, every page of their memory new); for later ones, after the units before it.
    const Times first = compile_once(request);
    std::printf("\nunit %s (%zu kernels), sm_%u, this process, medians of %d\n\n", name.c_str(),
                request.kernels.size(), kArch, reps);
    std::printf("| how | NVRTC | nvJitLink | whole compile | / as kiln compiles it | minor page faults |\n"
                "|---|---:|---:|---:|---:|---:|\n");
    if (first_only) {
      row("the unit's first compile in this process", first, first.wall);
      continue;
    }
    const Times base = median_of(request, reps);
    row("the unit's first compile in this process", first, base.wall);
    row("as kiln compiles it (one thread each)", base, base.wall);
    if (phases) {
    CompileRequest variant = request;
    variant.options.push_back("-split-compile=0");
    row("NVRTC -split-compile=0", median_of(variant, reps), base.wall);
    variant = request;
    variant.link_threads = 0;
    row("ptxas --split-compile=0", median_of(variant, reps), base.wall);
    variant.options.push_back("-split-compile=0");
    row("both", median_of(variant, reps), base.wall);
    if (kernels) {
    CompileRequest none = request;
    none.kernels.clear();
    none.expressions.clear();
    row("no kernel (the source and its headers only)", median_of(none, reps), base.wall);
    for (std::size_t k = 0; k < request.kernels.size(); ++k) {
      CompileRequest one = request;
      one.kernels = {request.kernels[k]};
      one.expressions = {request.expressions[k]};
      row("kernel " + request.kernels[k].name + " alone", median_of(one, reps), base.wall);
    }
    }
    }
    if (copies.empty()) continue;
    std::printf("\n| copies compiled at once | forked processes: median compile | the round | / this process's | "
                "minor page faults | kiln-jitd pool: median compile | its NVRTC | its nvJitLink | the round | workers |\n"
                "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const int n : copies) {
      const Round forked = at_once(request, n);
      const Round pooled = on_pool(request, n);
      std::printf("| %d | %.1f ms | %.1f ms | %.2f | %.0f | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %llu |\n", n, forked.each,
                  forked.round, forked.each / base.wall, forked.faults, pooled.each, pooled.nvrtc, pooled.link, pooled.round,
                  pooled.workers);
      std::fflush(stdout);
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_unit_phases: %s\n", e.what());
  return 1;
}
