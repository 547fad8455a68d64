// Several GPUs: what it takes to make every kernel ready on 1, 2, 4, ... devices of one process (time, host
// and device memory, libraries loaded and shared, compiles), and one process per GPU cold, on one cache
// directory, against one process alone (compiles counted, the most compiles at once on the machine, CPU
// time), with the machine-wide compile budget and without it, and with private cache directories.
// Prints two Markdown tables. Runs on as many GPUs as are visible (CUDA_VISIBLE_DEVICES); with one, the
// one-GPU rows only.
//
//   bench_multi_gpu [--devices 1,2,4] [--runs N] [--group-runs N] [--no-cold]
//
// Every measurement is a fresh process (this program run again as a child) with a fresh cache directory.
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>

#include "bench_util.hpp"
#include "examples_catalog.hpp"
#ifdef KILN_BENCH_PRIMITIVES
#include <kiln/prim/common.hpp>
#endif

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::now_ms;
using kiln::bench::remove_tree;

std::vector<const kiln::Catalog*> catalogs() {
  std::vector<const kiln::Catalog*> all{&kiln::examples::catalog()};
#ifdef KILN_BENCH_PRIMITIVES
  all.push_back(&kiln::prim::catalog());
#endif
  return all;
}

// The kernels a catalog makes ready: all but those of linked units (built with an operator only).
std::vector<std::string> kernels_of(const kiln::Catalog& catalog) {
  std::vector<std::string> names;
  for (const auto& k : catalog.kernels)
    if (!catalog.units[k.unit].linked) names.emplace_back(catalog.str(k.name));
  return names;
}

// kB from /proc/self/status ("VmRSS", "VmHWM").
double status_mb(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::stod(line.substr(line.find(':') + 1)) / 1024.0;
  return 0;
}

double device_used_mb(kiln::Registry& registry) {
  const kiln::Driver& cu = kiln::driver();
  kiln::check(cu.cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
  std::size_t free = 0, total = 0;
  kiln::check(cu.cuMemGetInfo(&free, &total), "cuMemGetInfo");
  CUcontext ignored;
  cu.cuCtxPopCurrent(&ignored);
  return static_cast<double>(total - free) / (1024.0 * 1024.0);
}

// `--ready-child STAMP DEVICES COLD`: every kernel of every catalog made ready on devices 0..DEVICES-1 of
// this process, one thread per device. Prints: contexts ms, ready ms, host RSS before and after (MB),
// peak RSS, device memory used per device before and after (MB, the device's own view: other processes'
// too), library loads, shares, units compiled.
int ready_child(int devices, bool cold) {
  const double t0 = now_ms();
  kiln::RegistryOptions options;
  if (cold) options.use_embedded = false, options.allow_ptx = false;
  std::vector<std::vector<std::unique_ptr<kiln::Registry>>> registries(devices);
  for (int d = 0; d < devices; ++d)
    for (const kiln::Catalog* c : catalogs()) registries[d].push_back(std::make_unique<kiln::Registry>(*c, d, options));
  std::vector<double> used_before(devices), used_after(devices);
  for (int d = 0; d < devices; ++d) {
    registries[d].front()->context();
    used_before[d] = device_used_mb(*registries[d].front());
  }
  const double t_contexts = now_ms();
  const double rss_before = status_mb("VmRSS");
  const kiln::LibraryStats libraries_before = kiln::library_stats();
  std::vector<std::thread> threads;
  std::atomic<int> cold_left{0};
  for (int d = 0; d < devices; ++d) {
    threads.emplace_back([&, d] {
      for (auto& r : registries[d]) r->precompile_all();
      for (auto& r : registries[d]) {
        const auto names = kernels_of(r->catalog());
        cold_left += static_cast<int>(r->ensure_warm(names, std::chrono::minutes(10)).size());
        for (const auto& name : names) r->get(name);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double t_ready = now_ms();
  for (int d = 0; d < devices; ++d) used_after[d] = device_used_mb(*registries[d].front());
  const kiln::LibraryStats libraries = kiln::library_stats();
  std::uint64_t compiles = 0;
  for (auto& row : registries)
    for (auto& r : row) compiles += r->stats().jit_compiles;
  std::printf("%.3f %.3f %.1f %.1f %.1f", t_contexts - t0, t_ready - t_contexts, rss_before, status_mb("VmRSS"),
              status_mb("VmHWM"));
  double before = 0, after = 0;
  for (int d = 0; d < devices; ++d) before += used_before[d], after += used_after[d];
  std::printf(" %.1f %.1f %llu %llu %llu %d\n", before / devices, (after - before) / devices,
              static_cast<unsigned long long>(libraries.loads - libraries_before.loads),
              static_cast<unsigned long long>(libraries.shared - libraries_before.shared),
              static_cast<unsigned long long>(compiles), cold_left.load());
  return 0;
}

// `--gpu-child STAMP`: one process of a group, one per GPU (CUDA_VISIBLE_DEVICES names its GPU, so it
// sees it as device 0, as torchrun's processes do): every kernel cold through the JIT tier. Prints: ms
// from the spawn to every kernel ready, units this process compiled, kernels still cold.
int gpu_child(double spawned) {
  kiln::RegistryOptions options;
  options.use_embedded = false, options.allow_ptx = false;
  std::vector<std::unique_ptr<kiln::Registry>> registries;
  for (const kiln::Catalog* c : catalogs()) registries.push_back(std::make_unique<kiln::Registry>(*c, 0, options));
  for (auto& r : registries) r->precompile_all();
  int left = 0;
  for (auto& r : registries) {
    const auto names = kernels_of(r->catalog());
    left += static_cast<int>(r->ensure_warm(names, std::chrono::minutes(10)).size());
    for (const auto& name : names) r->get(name);
  }
  std::uint64_t compiles = 0;
  for (auto& r : registries) compiles += r->stats().jit_compiles;
  std::printf("%.3f %llu %d\n", now_ms() - spawned, static_cast<unsigned long long>(compiles), left);
  return 0;
}

// The most requests of the traces in `dir` (trace-*) that ran at once, on the machine's monotonic clock.
int most_at_once(const std::string& dir, int processes) {
  std::vector<std::pair<double, int>> events;
  const std::regex field("\"(start|end|origin)\":([0-9.]+)");
  for (int p = 0; p < processes; ++p) {
    std::ifstream in(dir + "/trace-" + std::to_string(p));
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"event\":\"request\"") == std::string::npos) continue;
      double start = 0, end = 0, origin = 0;
      for (auto it = std::sregex_iterator(line.begin(), line.end(), field); it != std::sregex_iterator(); ++it) {
        const double v = std::stod((*it)[2]);
        if ((*it)[1] == "start") start = v;
        else if ((*it)[1] == "end") end = v;
        else origin = v;
      }
      events.emplace_back(origin + start, +1);
      events.emplace_back(origin + end, -1);
    }
  }
  std::sort(events.begin(), events.end());  // an end before a start at the same instant
  int now = 0, most = 0;
  for (const auto& e : events) most = std::max(most, now += e.second);
  return most;
}

struct Group {
  std::vector<double> ready_ms;  // per process
  std::uint64_t compiles = 0;
  int cold_left = 0;
  int most_at_once = 0;
  double wall_ms = 0, cpu_s = 0;
};

// The GPU child p is given: the p-th of this process's CUDA_VISIBLE_DEVICES where that is set (so that a
// run on GPUs 2,3 stays on them), else ordinal p.
std::string gpu_for(int p, int gpus) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::vector<std::string> listed;
  std::stringstream in(visible != nullptr ? visible : "");
  for (std::string item; std::getline(in, item, ',');) listed.push_back(item);
  if (static_cast<int>(listed.size()) >= gpus && gpus > 0) return listed[p % gpus];
  return std::to_string(p % gpus);
}

// `processes` children at once, child p on GPU p % gpus (CUDA_VISIBLE_DEVICES), each with the
// environment `env` added; `shared`: one cache directory for all, else one each.
Group run_group(const char* self, int processes, int gpus, bool shared, const std::vector<std::string>& env) {
  const std::string dir = make_temp_dir("multi-gpu");
  const double cpu_before = kiln::bench::children_cpu_seconds();
  std::vector<pid_t> pids;
  std::vector<int> outs;
  const double t0 = now_ms();
  for (int p = 0; p < processes; ++p) {
    std::vector<std::string> vars = env;
    vars.push_back("CUDA_VISIBLE_DEVICES=" + gpu_for(p, gpus));
    vars.push_back("KILN_CACHE_DIR=" + dir + (shared ? "/cache" : "/cache-" + std::to_string(p)));
    vars.push_back("KILN_JIT_TRACE=" + dir + "/trace-" + std::to_string(p));
    std::vector<char*> envp = kiln::bench::environment_with(vars);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%.6f", now_ms());
    char mode[] = "--gpu-child";
    char* argv[] = {const_cast<char*>(self), mode, stamp, nullptr};
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid = 0;
    if (posix_spawn(&pid, self, &actions, nullptr, argv, envp.data()) != 0) throw std::runtime_error("spawn");
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    pids.push_back(pid);
    outs.push_back(fds[0]);
  }
  Group g;
  for (int p = 0; p < processes; ++p) {
    char line[256] = {};
    FILE* out = ::fdopen(outs[p], "r");
    const bool got = std::fgets(line, sizeof line, out) != nullptr;
    std::fclose(out);
    int status = 0;
    ::waitpid(pids[p], &status, 0);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw std::runtime_error("process " + std::to_string(p) + " of " + std::to_string(processes) + " failed: " + line);
    char* cursor = line;
    g.ready_ms.push_back(std::strtod(cursor, &cursor));
    g.compiles += std::strtoull(cursor, &cursor, 10);
    g.cold_left += static_cast<int>(std::strtol(cursor, &cursor, 10));
  }
  g.wall_ms = now_ms() - t0;
  kiln::bench::reap_orphans();
  g.cpu_s = kiln::bench::children_cpu_seconds() - cpu_before;
  g.most_at_once = most_at_once(dir, processes);
  remove_tree(dir);
  return g;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

std::string range(const std::vector<double>& v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.0f-%.0f", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  return text;
}

int run(const char* self, int argc, char** argv) {
  std::vector<int> device_counts{1, 2, 4};
  int runs = 3;
  int group_runs = 1;
  bool cold_groups = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--devices" && i + 1 < argc) device_counts = parse_list(argv[++i]);
    else if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--group-runs" && i + 1 < argc) group_runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-cold") cold_groups = false;
    else {
      std::fprintf(stderr, "usage: bench_multi_gpu [--devices 1,2,4] [--runs N] [--group-runs N] [--no-cold]\n");
      return 2;
    }
  }
  int gpus = 0;
  kiln::check(kiln::driver().cuDeviceGetCount(&gpus), "cuDeviceGetCount");
  std::erase_if(device_counts, [&](int d) { return d < 1 || d > gpus; });
  char name[256] = {};
  kiln::driver().cuDeviceGetName(name, sizeof name, 0);
  std::size_t units = 0, kernels = 0;
  for (const kiln::Catalog* c : catalogs()) units += c->units.size(), kernels += kernels_of(*c).size();
  std::printf("%d visible GPU(s), device 0: %s; %u cores; %zu kernels in %zu units (%s)\n\n", gpus, name,
              std::thread::hardware_concurrency(), kernels, units,
              catalogs().size() > 1 ? "the examples and the primitives" : "the examples; the primitives are not built");

  std::printf("### Every kernel ready on D devices of one process, one thread per device (medians of %d fresh processes)\n\n", runs);
  std::printf("embedded: the build's binaries (or the JIT where it has none for this GPU); JIT: every unit compiled, "
              "once per architecture. Device MB: used on each device after its context came up, then what making the "
              "kernels ready added (the device's own view, other processes included).\n\n");
  std::printf("| tier | devices | contexts ms | ready ms | host RSS MB (after contexts) | host RSS added MB | peak RSS MB "
              "| device MB per device | device MB added per device | library loads | shared | units compiled | still cold |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const bool cold : {false, true}) {
    for (const int d : device_counts) {
      std::vector<std::vector<double>> columns;
      try {
        for (int r = 0; r < runs; ++r) {
          const std::string dir = make_temp_dir("multi-gpu-ready");
          const auto one = kiln::bench::run_children(self, {"--ready-child", std::to_string(d), cold ? "1" : "0"}, 1,
                                                     11, {"KILN_CACHE_DIR=" + dir});
          remove_tree(dir);
          columns.resize(one.size());
          for (std::size_t f = 0; f < one.size(); ++f) columns[f].push_back(one[f][0]);
        }
      } catch (const std::exception& e) {  // the row says so, and the others still run
        std::printf("| %s | %d | failed: %s |\n", cold ? "JIT" : "embedded", d, e.what());
        continue;
      }
      std::printf("| %s | %d | %.1f | %.1f | %.0f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f |\n",
                  cold ? "JIT" : "embedded", d, median(columns[0]), median(columns[1]), median(columns[2]),
                  median(columns[3]) - median(columns[2]), median(columns[4]), median(columns[5]), median(columns[6]),
                  median(columns[7]), median(columns[8]), median(columns[9]), median(columns[10]));
      std::fflush(stdout);
    }
  }
  if (!cold_groups) return 0;

  std::printf("\n### One process per GPU, every kernel cold through the JIT, against one process alone (medians of %d "
              "rounds, the rows alternating)\n\n", group_runs);
  std::printf("Each process sees its GPU as device 0 (CUDA_VISIBLE_DEVICES). ready ms: from its spawn to every kernel "
              "ready, the least and most of every round; at once: the most compiles running at the same moment on the machine (the processes' JIT "
              "traces); CPU s: every process and compiler. The budget: KILN_JIT_MACHINE_SLOTS (default: the cores).\n\n");
  std::printf("| processes | cache directory | budget | wall ms | ready ms per process | units compiled | at once | CPU s | still cold |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const std::string cores = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  struct Row {
    int processes;
    bool shared;
    std::string budget;  // KILN_JIT_MACHINE_SLOTS, empty: the default
  };
  std::vector<Row> rows{{1, true, ""}};
  for (const int d : device_counts) {
    if (d < 2) continue;
    rows.push_back({d, true, ""});
    rows.push_back({d, true, "4096"});
    rows.push_back({d, false, ""});
  }
  // Rounds alternate the rows, so a drift of the machine spreads over every row alike; medians per row.
  std::vector<std::vector<Group>> done(rows.size());
  std::vector<std::string> failed(rows.size());
  for (int r = 0; r < group_runs; ++r) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!failed[i].empty()) continue;
      std::vector<std::string> env;
      if (!rows[i].budget.empty()) env.push_back("KILN_JIT_MACHINE_SLOTS=" + rows[i].budget);
      try {
        done[i].push_back(run_group(self, rows[i].processes, gpus, rows[i].shared, env));
      } catch (const std::exception& e) {  // the row says so, and the others still run
        failed[i] = e.what();
      }
    }
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const std::string budget = row.budget.empty() ? cores + " slots" : "none";
    const char* cache = row.shared ? "one, shared" : "one each";
    if (!failed[i].empty()) {
      std::printf("| %d | %s | %s | failed: %s |\n", row.processes, cache, budget.c_str(), failed[i].c_str());
      continue;
    }
    std::vector<double> wall, ready, compiles, at_once, cpu, cold;
    for (const Group& g : done[i]) {
      wall.push_back(g.wall_ms);
      ready.insert(ready.end(), g.ready_ms.begin(), g.ready_ms.end());
      compiles.push_back(static_cast<double>(g.compiles));
      at_once.push_back(g.most_at_once);
      cpu.push_back(g.cpu_s);
      cold.push_back(g.cold_left);
    }
    std::printf("| %d | %s | %s | %.0f | %s | %.0f | %.0f | %.1f | %.0f |\n", row.processes, cache, budget.c_str(),
                median(wall), range(ready).c_str(), median(compiles), median(at_once), median(cpu), median(cold));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 5 && std::strcmp(argv[1], "--ready-child") == 0) return ready_child(std::atoi(argv[3]), std::atoi(argv[4]) != 0);
    if (argc >= 3 && std::strcmp(argv[1], "--gpu-child") == 0) return gpu_child(std::strtod(argv[2], nullptr));
    // The children are this executable, by its full path whatever the caller typed.
    char self[4096] = {};
    if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0) throw std::runtime_error("readlink /proc/self/exe");
    return run(self, argc, argv);
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.code() == kiln::Errc::no_driver || e.code() == kiln::Errc::no_device ? 77 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_multi_gpu: %s\n", e.what());
    return 1;
  }
}
