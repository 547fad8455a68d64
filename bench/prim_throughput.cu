// Kiln's primitives against nvcc-compiled cub::Device*, side by side in one
// process: for each family and type at 2^20, 2^24 and 2^28 items, the median rate of each and their ratio.
// Then, each in a fresh process: each family's kernels made ready and its first run (embedded tier), and
// the time until every kernel of the primitives' registry is ready.
//
//   bench_prim [--sizes 20,24,28] [--reps 25] [--only FAMILY[,FAMILY]] [--no-latency]
#include "prim_bench.hpp"
#include "prim_bench_util.cuh"

#include <kiln/prim/common.hpp>
#include <kiln/prim/operator.hpp>

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace kiln::bench {
namespace {

struct Family {
  const char* name;
  std::vector<Row> (*rows)(std::size_t n);
  const char* kernel_prefixes;  // comma-separated: the registry kernels its rows' plans use
};

// One entry per family file (prim_bench_<family>.cu).
const Family kFamilies[] = {
    {"exclusive_scan", scan_rows, "exclusive_scan_"},
    {"reduce", reduce_rows, "reduce_,segmented_reduce_"},
    {"merge_sort", merge_sort_rows, "merge_sort_"},
    {"unique_by_key", unique_by_key_rows, "unique_by_key_"},
    {"segmented_sort", segmented_sort_rows, "segmented_sort_"},
    {"radix_sort_pairs", radix_sort_rows, "radix_sort_pairs_"},
    {"select", select_rows, "select_"},
    {"search", search_rows, "lower_bound_,upper_bound_"},
    {"operator", operator_rows, "linked_"},  // linked at plan time: the latency table's own rows
    {"lazy", lazy_rows, ""},  // its own registry (bench_lazy): no kernel of the primitives' registry
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Milliseconds of one enqueue of `run` on `stream`, by CUDA events around it.
double time_once(const std::function<void(CUstream)>& run, cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop) {
  check_cuda(cudaEventRecord(start, stream));
  run(stream);
  check_cuda(cudaEventRecord(stop, stream));
  check_cuda(cudaEventSynchronize(stop));
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

void throughput(const std::vector<int>& log2_sizes, int reps, const std::vector<std::string>& only) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start));
  check_cuda(cudaEventCreate(&stop));
  std::printf("| family | type | items | kiln | cub::Device* | kiln / CUB |\n|---|---|---|---|---|---|\n");
  for (const Family& family : kFamilies) {
    if (!only.empty() && std::find(only.begin(), only.end(), family.name) == only.end()) continue;
    for (int log2 : log2_sizes) {
      const std::size_t n = std::size_t{1} << log2;
      for (Row& row : family.rows(n)) {
        std::vector<double> kiln_ms, cub_ms;
        for (int i = 0; i < reps + 3; ++i) {  // the first 3 of each are warm-up
          if (row.reset) row.reset(stream);
          const double k = time_once(row.kiln, stream, start, stop);
          if (row.reset) row.reset(stream);
          const double c = time_once(row.cub, stream, start, stop);
          if (i >= 3) kiln_ms.push_back(k), cub_ms.push_back(c);
        }
        const double k = median(kiln_ms), c = median(cub_ms);
        const bool gbs = row.bytes > 0;
        const double work = gbs ? row.bytes : double(row.n);
        auto rate = [&](double ms) {
          char b[64];
          std::snprintf(b, sizeof b, gbs ? "%.0f GB/s" : "%.2f G items/s", work / (ms * 1e-3) / 1e9);
          return std::string(b);
        };
        std::printf("| %s | %s | 2^%d | %s | %s | %.3f |\n", row.family.c_str(), row.type.c_str(), log2,
                    rate(k).c_str(), rate(c).c_str(), c / k);
        std::fflush(stdout);
        if (row.release) row.release();
      }
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(x);
  return out;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Child: after the context exists, (1) every registry kernel of `family` made launchable (what building
// its plans costs first in a process) and (2) its first run at 2^20 items once the inputs exist, in ms.
int child_first_call(const char* family) {
  check_cuda(cudaFree(nullptr));  // driver + primary context, not part of the measurement
  kiln::Registry& registry = kiln::prim::registry();
  registry.context();
  for (const Family& f : kFamilies) {
    if (std::strcmp(f.name, family) != 0) continue;
    const auto prefixes = split(f.kernel_prefixes);
    const auto t0 = std::chrono::steady_clock::now();
    for (const kiln::KernelEntry& k : registry.catalog().kernels) {
      const std::string_view name = registry.catalog().str(k.name);
      if (registry.catalog().units[k.unit].linked) continue;  // linked when the rows' plans are made
      for (const auto& p : prefixes)
        if (name.substr(0, p.size()) == p) registry.get(name);
    }
    const double ready = ms_since(t0);
    std::vector<Row> rows = f.rows(std::size_t{1} << 20);  // plans (kernels now in memory) and inputs
    check_cuda(cudaDeviceSynchronize());
    const auto t1 = std::chrono::steady_clock::now();
    rows.front().kiln(nullptr);
    check_cuda(cudaDeviceSynchronize());
    std::printf("%.3f %.3f\n", ready, ms_since(t1));
    return 0;
  }
  return 2;
}

// Child: every kernel of the primitives' registry made launchable, in ms.
int child_all_ready() {
  check_cuda(cudaFree(nullptr));
  kiln::Registry& registry = kiln::prim::registry();
  registry.context();
  const auto t0 = std::chrono::steady_clock::now();
  const kiln::Catalog& catalog = registry.catalog();
  // Embedded kernels are deferred by the warm-up and loaded by get(); cold ones (a build without this
  // GPU's arch) compile in parallel on the JIT pool first.
  std::vector<std::string> names;
  for (const kiln::KernelEntry& k : catalog.kernels) {
    if (!catalog.units[k.unit].linked) names.emplace_back(catalog.str(k.name));  // linked: with an operator only
  }
  registry.precompile_all();
  registry.ensure_warm(names, std::chrono::minutes(10));
  for (const auto& name : names) registry.get(name);
  std::printf("%.3f %zu\n", ms_since(t0), names.size());
  return 0;
}

// Child: a ReduceWith<float> plan built from `text` (its kernels linked: JIT, or disk), in ms, the tier,
// and its two steps: the first kernel's get (key, disk or JIT, library load), then the plan's construction
// (its kernels from memory, CUB's device queries).
int child_operator(const char* text) {
  check_cuda(cudaFree(nullptr));
  kiln::prim::registry().context();
  const auto t0 = std::chrono::steady_clock::now();
  const kiln::LinkedSource link = kiln::prim::linked_operator_source({text}, "float", "ReduceWith<float>");
  const kiln::Kernel first = kiln::prim::registry().get("linked_reduce_f32_single_tile", link);
  const double get_ms = ms_since(t0);
  kiln::prim::ReduceWith<float> plan(kiln::prim::Operator{text});
  const double ms = ms_since(t0);
  std::printf("%.3f %s %.3f %.3f\n", ms, std::string(kiln::to_string(first.provenance.source)).c_str(), get_ms,
              ms - get_ms);
  return 0;
}

// Child: the plain reduce_f64 unit (the same CUB reduce kernels, operator built in) compiled by the JIT
// tier, no embedded binary or PTX, in the disk cache $KILN_CACHE_DIR names (empty: cold), in ms.
int child_unit_cold() {
  check_cuda(cudaFree(nullptr));
  kiln::RegistryOptions options;
  options.use_embedded = false;
  options.allow_ptx = false;
  kiln::Registry registry(kiln::prim::catalog(), 0, options);
  registry.context();
  const auto t0 = std::chrono::steady_clock::now();
  const kiln::Kernel k = registry.get("reduce_f64_sweep");
  const double ms = ms_since(t0);
  std::printf("%.3f %s\n", ms, std::string(kiln::to_string(k.provenance.source)).c_str());
  return 0;
}

std::string run_child(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid;
  if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ) != 0) return {};
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t r; (r = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, std::size_t(r));
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return out;
}

void latency(int runs) {
  std::printf("\n| fresh process (after the context exists), median of %d | its kernels ready (get) | first run, 2^20 items |\n"
              "|---|---|---|\n", runs);
  for (const Family& f : kFamilies) {
    if (*f.kernel_prefixes == '\0') continue;  // no kernel of the primitives' registry to make ready
    std::vector<double> ready, run;
    for (int i = 0; i < runs; ++i) {
      std::istringstream s(run_child({"bench_prim", "--child-first-call", f.name}));
      double a = 0, b = 0;
      s >> a >> b;
      ready.push_back(a), run.push_back(b);
    }
    std::printf("| %s | %.3f ms | %.3f ms |\n", f.name, median(ready), median(run));
  }
  std::vector<double> ms;
  std::size_t kernels = 0;
  for (int i = 0; i < runs; ++i) {
    std::istringstream s(run_child({"bench_prim", "--child-all-ready"}));
    double t;
    s >> t >> kernels;
    ms.push_back(t);
  }
  std::printf("| all %zu kernels of the primitives ready (precompile_all, then every get()) | %.3f ms | |\n", kernels,
              median(ms));
}

// A run-time operator's plan in a fresh process: cold (a text no process linked before: NVRTC + LTO link),
// then the same text again (the disk cache); beside it the plain CUB reduce unit's cold JIT in an empty
// cache directory. Alternating, `runs` rounds.
void operator_latency(int runs) {
  std::vector<double> cold, warm, unit;
  std::string tiers;
  for (int i = 0; i < runs; ++i) {
    const std::string text = "__device__ float op(float a, float b) { return a > b ? a : b; }  // round " +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    double ms = 0;
    std::string tier;
    std::istringstream first(run_child({"bench_prim", "--child-operator", text}));
    first >> ms >> tier;
    cold.push_back(ms), tiers += " " + tier;
    std::istringstream again(run_child({"bench_prim", "--child-operator", text}));
    double get_ms = 0, plan_ms = 0;
    again >> ms >> tier >> get_ms >> plan_ms;
    warm.push_back(ms), tiers += "/" + tier;
    char parts[96];
    std::snprintf(parts, sizeof parts, " (first get %.3f + plan %.3f ms)", get_ms, plan_ms);
    tiers += parts;
    char dir[] = "/tmp/kiln-bench-cold-XXXXXX";
    if (mkdtemp(dir)) {
      const char* before = std::getenv("KILN_CACHE_DIR");
      const std::string saved = before ? before : "";
      setenv("KILN_CACHE_DIR", dir, 1);
      std::istringstream u(run_child({"bench_prim", "--child-unit-cold"}));
      u >> ms >> tier;
      unit.push_back(ms), tiers += "/" + tier;
      if (before) setenv("KILN_CACHE_DIR", saved.c_str(), 1); else unsetenv("KILN_CACHE_DIR");
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  }
  std::printf("\n| ReduceWith<float>, fresh process (after the context exists), median of %d | ms |\n|---|---|\n", runs);
  std::printf("| new operator text: plan built (operator by NVRTC to LTO-IR, linked by nvJitLink -lto with the unit's "
              "embedded LTO-IR, or the unit compiled too where the build has none) | %.1f |\n", median(cold));
  std::printf("| same text, another process: plan built (disk cache) | %.3f |\n", median(warm));
  std::printf("| the plain reduce_f64 unit's cold JIT (NVRTC + nvJitLink, empty cache) | %.1f |\n", median(unit));
  std::printf("| new operator / plain unit cold | %.3f |\n", median(cold) / median(unit));
  std::printf("(tiers, per round cold/warm/unit:%s)\n", tiers.c_str());
}


}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  if (argc == 3 && std::strcmp(argv[1], "--child-first-call") == 0) return child_first_call(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--child-all-ready") == 0) return child_all_ready();
  if (argc == 3 && std::strcmp(argv[1], "--child-operator") == 0) return child_operator(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--child-unit-cold") == 0) return child_unit_cold();
  std::vector<int> sizes = {20, 24, 28};
  int reps = 25;
  bool with_latency = true;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (const auto& s : split(argv[++i])) sizes.push_back(std::stoi(s));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = split(argv[++i]);
    } else if (a == "--no-latency") {
      with_latency = false;
    } else {
      std::fprintf(stderr, "usage: bench_prim [--sizes 20,24,28] [--reps N] [--only FAMILY,...] [--no-latency]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_prim: no GPU; run it on a machine with one\n");
    return 0;
  }
  kiln::prim::registry().context();
  cudaDeviceProp prop;
  check_cuda(cudaGetDeviceProperties(&prop, 0));
  std::printf("bench_prim on %s (sm_%d%d), medians of %d runs each, kiln and CUB alternating\n\n", prop.name,
              prop.major, prop.minor, reps);
  throughput(sizes, reps, only);
  if (with_latency) latency(5);
  if (with_latency && (only.empty() || std::find(only.begin(), only.end(), "operator") != only.end())) operator_latency(5);
  return 0;
}
