// bench/startup.cpp — time from process start to the first result of the CUB example kernel (embedded tier),
// split into its phases, and the cost of a second get(). Prints one Markdown table of medians.
//
// The parent spawns itself `runs` times; each child reads CLOCK_MONOTONIC (system-wide, so comparable
// with the parent's) at each phase and prints the offsets from the moment the parent called posix_spawn.
#include <kiln/kiln.hpp>

#include "examples_catalog.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr const char* kKernel = "block_sum_f32";
constexpr int kPhases = 8;
constexpr const char* kPhaseNames[kPhases] = {
    "spawn -> main()",
    "main() -> driver + primary context (cuInit, retain)",
    "get() from the embedded tier: first unit loaded in the context",
    "alloc + copy in + launch + copy out (1M floats)",
    "process start -> first result (total)",
    "get() from the embedded tier: another unit (vector_add)",
    "get() from the embedded tier: 2nd kernel of a loaded unit (scale_f64)",
    "second get() (in-memory tier), ns",
};

double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median over batches of the mean time of one get() of a loaded kernel, in nanoseconds.
double second_get_ns(kiln::Registry& registry) {
  std::vector<double> batches;
  for (int b = 0; b < 101; ++b) {
    constexpr int n = 10'000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      kiln::Kernel k = registry.get(kKernel);
      asm volatile("" : : "r"(k.function) : "memory");  // keep the call
    }
    batches.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  return median(batches);
}

int child(double spawned_ms) {
  const double t_main = now_ms();
  kiln::Registry registry(kiln::examples::catalog());
  registry.context();
  const double t_context = now_ms();
  const kiln::Kernel k = registry.get(kKernel);
  const double t_get = now_ms();

  const auto& d = kiln::driver();
  kiln::check(d.cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
  const int n = 1 << 20, blocks = 64;
  std::vector<float> in(n, 1.0f), partial(blocks);
  CUdeviceptr din, dpartial;
  kiln::check(d.cuMemAlloc(&din, n * sizeof(float)), "cuMemAlloc");
  kiln::check(d.cuMemAlloc(&dpartial, blocks * sizeof(float)), "cuMemAlloc");
  kiln::check(d.cuMemcpyHtoD(din, in.data(), n * sizeof(float)), "cuMemcpyHtoD");
  kiln::launch(k, {blocks}, {256}, 0, nullptr, din, dpartial, n);
  kiln::check(d.cuMemcpyDtoH(partial.data(), dpartial, blocks * sizeof(float)), "cuMemcpyDtoH");
  const double t_result = now_ms();
  double sum = 0;
  for (float p : partial) sum += p;
  if (sum != n) {
    std::fprintf(stderr, "wrong result: %f\n", sum);
    return 1;
  }
  // Later first loads in the same context: what a program pays per kernel once CUDA is warm.
  const double t_other0 = now_ms();
  registry.get("vector_add");
  const double t_other1 = now_ms();
  registry.get("scale_f32");
  const double t_sibling0 = now_ms();
  registry.get("scale_f64");
  const double t_sibling1 = now_ms();
  const double get_ns = second_get_ns(registry);
  d.cuMemFree(din);
  d.cuMemFree(dpartial);
  CUcontext ignored;
  d.cuCtxPopCurrent(&ignored);
  std::printf("%.6f %.6f %.6f %.6f %.6f %.6f %.6f %.3f %u\n", t_main - spawned_ms, t_context - t_main,
              t_get - t_context, t_result - t_get, t_result - spawned_ms, t_other1 - t_other0, t_sibling1 - t_sibling0,
              get_ns, k.provenance.arch);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(std::atof(argv[2]));
  const int runs = argc > 1 ? std::atoi(argv[1]) : 11;
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("startup benchmark skipped: %s\n", e.what());
    return 0;
  }
  std::vector<std::vector<double>> phases(kPhases);
  unsigned arch = 0;
  for (int r = 0; r < runs; ++r) {
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%.6f", now_ms());
    char* child_argv[] = {argv[0], const_cast<char*>("--child"), stamp, nullptr};
    int fds[2];
    if (pipe(fds) != 0) return 1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, child_argv, environ) != 0) return 1;
    close(fds[1]);
    char line[512] = {};
    FILE* out = fdopen(fds[0], "r");
    const bool got = std::fgets(line, sizeof line, out) != nullptr;
    fclose(out);
    int status = 0;
    waitpid(pid, &status, 0);
    double v[kPhases];
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        std::sscanf(line, "%lf %lf %lf %lf %lf %lf %lf %lf %u", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                    &v[7], &arch) != 9) {
      std::fprintf(stderr, "run %d failed: %s\n", r, line);
      return 1;
    }
    for (int p = 0; p < kPhases; ++p) phases[p].push_back(v[p]);
  }
  const auto info = kiln::Registry(kiln::examples::catalog()).device();
  std::printf("kiln startup: %s (sm_%u), driver %d, %d runs, kernel %s from the embedded sm_%u cubin\n\n",
              info.name.c_str(), info.arch, info.driver_version, runs, kKernel, arch);
  std::printf("| phase | median | min | max |\n|---|---:|---:|---:|\n");
  for (int p = 0; p < kPhases; ++p) {
    auto& v = phases[p];
    const char* unit = p == kPhases - 1 ? "ns" : "ms";
    std::printf("| %s | %.3f %s | %.3f %s | %.3f %s |\n", kPhaseNames[p], median(v), unit,
                *std::min_element(v.begin(), v.end()), unit, *std::max_element(v.begin(), v.end()), unit);
  }
  return 0;
}
