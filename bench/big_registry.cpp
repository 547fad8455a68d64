// Start-up of a big registry: 200 generated units of realistic sizes
// (big_registry/make_table.py), from process start until every kernel is ready, (a) all embedded, eager
// and lazy, (b) all on disk, (c) all cold through the JIT tier with 1, 2, 4, 8 and 16 worker processes
// and with 16 in-process threads, and the unit the table ended with on the most workers alone (T, the
// bound no schedule beats); and the footprint: embedded bytes per architecture, the disk cache's
// size for the 200 units, and the peak host memory (all processes) of the cold JIT with the most workers.
//
// (a) and (b) need a GPU; (c) and the footprint do not (the JIT compiles for --arch, sm_90 by default).
// Prints Markdown; `--csv FILE` also writes the rows as CSV.
//
//   bench_big_registry [--runs N] [--jit-runs N] [--arch 90] [--workers 1,2,4,8,16] [--csv FILE]
//   bench_big_registry --settings [--runs N] [--arch 90]
//
// `--settings`: only the cold JIT of the whole table with the machine's cores as workers, once per
// setting in each round (the defaults, parts never and always, no PCH files, 32 machine slots), the
// settings interleaved so that the machine's drift falls on all alike; wall and CPU time (the process and
// its workers) per setting, and each against the best wall and against the CPU of the units compiled whole.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>

#include "big_catalog.hpp"
#include "bench_util.hpp"
#include "fill_cache.hpp"

#include <dirent.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::children_cpu_seconds;
using kiln::bench::median;
using kiln::bench::reap_orphans;
using kiln::bench::now_ms;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

std::vector<std::string> kernel_names() {
  const kiln::Catalog& c = kiln::big::catalog();
  std::vector<std::string> names;
  for (const auto& k : c.kernels) names.emplace_back(c.str(k.name));
  return names;
}

// `--child SPAWNED eager|lazy|disk [DIR]`: prints spawn -> main, main -> context, then the mode's time.
//  eager: every kernel made launchable (get) at start;
//  lazy:  the registry serving its first kernel (the others load at their first get, each paying the
//         per-kernel time printed third: the mean of the remaining first gets);
//  disk:  every kernel from the disk cache DIR (use_embedded off).
int child(double spawned_ms, const std::string& mode, const char* dir) {
  const double t_main = now_ms();
  if (mode == "disk") setenv("KILN_CACHE_DIR", dir, 1);
  kiln::RegistryOptions options;
  options.use_embedded = mode != "disk";
  options.allow_ptx = false;
  options.use_jit = false;  // a miss is a failure here, not a compile
  kiln::Registry registry(kiln::big::catalog(), 0, options);
  registry.context();
  const double t_context = now_ms();
  const auto names = kernel_names();
  double ready = 0, per_kernel = 0;
  if (mode == "lazy") {
    registry.get(names.front());
    ready = now_ms() - t_context;
    const double t0 = now_ms();
    for (std::size_t i = 1; i < names.size(); ++i) registry.get(names[i]);
    per_kernel = (now_ms() - t0) / static_cast<double>(names.size() - 1);
  } else {
    for (const auto& name : names) {
      const kiln::Kernel k = registry.get(name);
      if (mode == "disk" && k.provenance.source != kiln::Tier::disk) return 1;
    }
    ready = now_ms() - t_context;
  }
  std::printf("%.6f %.6f %.6f %.6f\n", t_main - spawned_ms, t_context - t_main, ready, per_kernel);
  return 0;
}

// `--jit-child SPAWNED ARCH [KERNEL...]`: every unit (or the units of the kernels named) compiled cold for
// ARCH into $KILN_CACHE_DIR with the JIT tier (KILN_JIT_WORKERS workers, or in-process threads when
// KILN_JITD names no executable); prints spawn -> main and the wall time of the compile.
int jit_child(double spawned_ms, unsigned arch, std::vector<std::string> kernels) {
  const double t_main = now_ms();
  const auto results = kiln::precompile(kiln::big::catalog(), arch, kernels, 0);
  const double t_done = now_ms();
  for (const auto& r : results) {
    if (!r.ok) {
      std::fprintf(stderr, "%s\n", r.error.message.c_str());
      return 1;
    }
  }
  std::printf("%.6f %.6f\n", t_main - spawned_ms, t_done - t_main);
  return 0;
}

// The resident memory of `root` and all its descendants, in bytes (/proc; 0 once it has ended).
std::uint64_t tree_rss(pid_t root) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::uint64_t> rss;
  const long page = sysconf(_SC_PAGESIZE);
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      const std::size_t close = text.rfind(')');
      long ppid = -1;
      if (close == std::string::npos || std::sscanf(text.c_str() + close + 1, " %*c %ld", &ppid) != 1) continue;
      std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
      std::uint64_t size = 0, resident = 0;
      statm >> size >> resident;
      parent[pid] = static_cast<pid_t>(ppid);
      rss[pid] = resident * static_cast<std::uint64_t>(page);
    }
    closedir(proc);
  }
  std::uint64_t total = 0;
  for (const auto& [pid, bytes] : rss) {
    for (pid_t p = pid; p > 1; p = parent.count(p) ? parent[p] : 0) {
      if (p == root) {
        total += bytes;
        break;
      }
    }
  }
  return total;
}

// What the pool's trace (KILN_JIT_TRACE, jit/pool/trace.hpp) says of one cold run: how busy its workers
// were between the first request's start and the last one's end, and where a request's time went.
struct TraceSummary {
  double busy = 0;         // the workers' time on requests / (the pool's size x span)
  double compile_ms = 0;   // median NVRTC + nvJitLink of a request, as the worker measured them
  double compile_total_ms = 0;  // NVRTC + nvJitLink of every request, summed: the compilers' own time
  double exchange_ms = 0;  // median of the rest of a request on its worker: transfer, decoding, stripping
  double first_ms = 0;     // the first request's start, from the pool's making
  double span_ms = 0;      // first start to last end
  double spawn_ms = 0;     // median worker start: spawn to hello
  std::string last_unit;   // the request that ended last ("REGISTRY/UNIT")
};

double json_number(const std::string& line, const char* key) {
  const std::string k = std::string("\"") + key + "\":";
  const auto at = line.find(k);
  return at == std::string::npos ? 0 : std::atof(line.c_str() + at + k.size());
}

// A string field of a trace line (no escapes in the pool's values); empty when absent.
std::string json_string(const std::string& line, const char* key) {
  const std::string k = std::string("\"") + key + "\":\"";
  const auto at = line.find(k);
  if (at == std::string::npos) return {};
  const auto from = at + k.size();
  return line.substr(from, line.find('"', from) - from);
}

TraceSummary summarize_trace(const std::string& path, unsigned pool_size) {
  std::ifstream in(path);
  std::map<long, double> busy_of;
  std::vector<double> compile, exchange, spawn;
  double first = 1e300, last = 0;
  std::string last_unit;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"event\":\"spawn\"") != std::string::npos) {
      spawn.push_back(json_number(line, "hello") - json_number(line, "at"));
      continue;
    }
    const double start = json_number(line, "start"), end = json_number(line, "end");
    const double work = json_number(line, "nvrtc") + json_number(line, "link");
    busy_of[static_cast<long>(json_number(line, "worker"))] += end - start;
    compile.push_back(work);
    exchange.push_back(end - start - work);
    first = std::min(first, start);
    if (end > last) last_unit = json_string(line, "unit");
    last = std::max(last, end);
  }
  TraceSummary t;
  if (compile.empty()) return t;
  double busy = 0;
  for (const auto& [worker, ms] : busy_of) busy += ms;
  t.span_ms = last - first;
  // The pool's size, not the workers seen: a worker replaced (to build a PCH on a fresh one) is one slot.
  t.busy = busy / (static_cast<double>(pool_size) * t.span_ms);
  t.compile_ms = median(compile);
  for (const double c : compile) t.compile_total_ms += c;
  t.exchange_ms = median(exchange);
  t.first_ms = first;
  t.spawn_ms = spawn.empty() ? 0 : median(spawn);
  t.last_unit = last_unit;
  return t;
}

std::uint64_t directory_bytes(const std::string& dir) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".kiln") bytes += e.file_size(ec);
  return bytes;
}

struct Table {
  std::ostringstream md, csv;
  void row(const std::string& what, const std::string& value, const std::string& note = "") {
    md << "| " << what << " | " << value << " | " << note << " |\n";
    csv << '"' << what << "\",\"" << value << "\",\"" << note << "\"\n";
  }
};

std::string ms(double v) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f ms", v);
  return text;
}

std::string mib(std::uint64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

// `--settings`: the defaults of the JIT pool against each setting that changes its schedule, side by side.
int settings_table(const char* self, unsigned arch, int rounds) {
  // This process reaps the workers of its children (their CPU time counts).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const std::string cores = "KILN_JIT_WORKERS=" + std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  struct Setting {
    std::string label;
    std::vector<std::string> env;
    std::vector<double> wall, cpu;
    std::vector<std::string> last, splits;  // the unit each run ended with; the first run's split decisions
  };
  std::vector<Setting> settings = {
      {"defaults (KILN_JIT_SPLIT unset: the cost model)", {cores}},
      {"KILN_JIT_SPLIT=0 (every unit whole)", {cores, "KILN_JIT_SPLIT=0"}},
      {"KILN_JIT_SPLIT=1 (parts wherever the pool would split)", {cores, "KILN_JIT_SPLIT=1"}},
      {"KILN_JIT_PCH=0", {cores, "KILN_JIT_PCH=0"}},
      {"KILN_JIT_MACHINE_SLOTS=32", {cores, "KILN_JIT_MACHINE_SLOTS=32"}},
  };
  for (int r = 0; r < rounds; ++r) {
    for (auto& setting : settings) {
      const std::string dir = make_temp_dir("big-settings");
      auto env = setting.env;
      env.push_back("KILN_CACHE_DIR=" + dir);
      env.push_back("KILN_JIT_TRACE=" + dir + "/trace.jsonl");
      reap_orphans();
      const double cpu_before = children_cpu_seconds();
      const auto one = run_children(self, {"--jit-child", std::to_string(arch)}, 1, 2, env, {}, true);
      reap_orphans();
      setting.wall.push_back(one[1][0]);
      setting.cpu.push_back(children_cpu_seconds() - cpu_before);
      setting.last.push_back(summarize_trace(dir + "/trace.jsonl", std::max(1u, std::thread::hardware_concurrency())).last_unit);
      // The pool's split decisions, as its trace gives them, of the first round of each setting.
      if (r == 0) {
        std::ifstream trace(dir + "/trace.jsonl");
        for (std::string line; std::getline(trace, line);)
          if (line.find("\"event\":\"split\"") != std::string::npos) setting.splits.push_back(line);
      }
      remove_tree(dir);
    }
  }
  double best = 0;
  for (const auto& s : settings) best = best == 0 ? median(s.wall) : std::min(best, median(s.wall));
  const double whole_cpu = median(settings[1].cpu);
  std::printf("The 200-unit table cold through the JIT for sm_%u, %s, each setting once per round, %d rounds\n\n",
              arch, cores.c_str(), rounds);
  std::printf("| setting | wall ms (median; runs) | / best wall | CPU s (median) | / CPU whole |\n|---|---|---:|---:|---:|\n");
  for (const auto& s : settings) {
    std::string runs_text;
    for (double w : s.wall) runs_text += (runs_text.empty() ? "" : " · ") + std::to_string(static_cast<long>(w));
    std::printf("| %s | %.0f (%s) | %.2f | %.1f | %.2f |\n", s.label.c_str(), median(s.wall), runs_text.c_str(),
                median(s.wall) / best, median(s.cpu), whole_cpu > 0 ? median(s.cpu) / whole_cpu : 0.0);
  }
  std::printf("\nThe unit each run ended with, and the split decisions of each setting's first run (the pool's trace):\n\n");
  for (const auto& s : settings) {
    std::string last;
    for (const auto& u : s.last) last += (last.empty() ? "" : ", ") + u;
    std::printf("- %s: ended with %s\n", s.label.c_str(), last.c_str());
    for (const auto& line : s.splits) std::printf("  - `%s`\n", line.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--child") == 0)
    return child(std::atof(argv[2]), argv[3], argc > 4 ? argv[4] : "");
  if (argc >= 4 && std::strcmp(argv[1], "--jit-child") == 0)
    return jit_child(std::atof(argv[2]), static_cast<unsigned>(std::atoi(argv[3])), {argv + 4, argv + argc});

  if (argc >= 2 && std::strcmp(argv[1], "--settings") == 0) {
    int rounds = 3;
    unsigned at = 90;
    for (int i = 2; i + 1 < argc; i += 2) {
      if (std::strcmp(argv[i], "--runs") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
      else if (std::strcmp(argv[i], "--arch") == 0) at = static_cast<unsigned>(std::atoi(argv[i + 1]));
    }
    return settings_table(argv[0], at, rounds);
  }
  int runs = 5;
  int jit_runs = 0;  // 0: runs
  unsigned arch = 90;
  std::vector<unsigned> workers = {1, 2, 4, 8, 16};
  std::string csv_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    else if (flag == "--jit-runs") jit_runs = std::atoi(argv[i + 1]);
    else if (flag == "--arch") arch = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (flag == "--csv") csv_path = argv[i + 1];
    else if (flag == "--workers") {
      workers.clear();
      std::stringstream list(argv[i + 1]);
      for (std::string w; std::getline(list, w, ',');) workers.push_back(static_cast<unsigned>(std::stoul(w)));
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--jit-runs N] [--arch 90] [--workers 1,2,4,8,16] [--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }

  const kiln::Catalog& catalog = kiln::big::catalog();
  Table table;
  const bool gpu = kiln::driver_available();
  std::string machine = "no GPU";
  if (gpu) {
    kiln::Registry probe(catalog);
    const auto info = probe.device();
    machine = info.name + " (sm_" + std::to_string(info.arch) + "), driver " + std::to_string(info.driver_version);
    arch = info.arch;
  }
  std::printf("kiln big registry: %zu units, %zu kernels; %s; %u cores; medians of %d fresh processes\n\n",
              catalog.units.size(), catalog.kernels.size(), machine.c_str(), std::thread::hardware_concurrency(),
              runs);
  std::printf("| what | median | note |\n|---|---:|---|\n");

  if (gpu) {
    const auto eager = run_children(argv[0], {"--child", "eager"}, runs, 4);
    const auto lazy = run_children(argv[0], {"--child", "lazy"}, runs, 4);
    table.row("driver + primary context (cuInit, retain), not counted below", ms(median(eager[1])));
    table.row("(a) all embedded, eager: every kernel launchable", ms(median(eager[2])), "get() of all, after the context");
    table.row("(a) all embedded, lazy: the first kernel launchable", ms(median(lazy[2])),
              "each further kernel at its first get(): " + ms(median(lazy[3])));
    const std::string dir = make_temp_dir("big-disk");
    {
      kiln::CacheConfig config;
      config.dir = dir;
      kiln::DiskCache cache(config);
      kiln::Registry registry(catalog);
      kiln::test::fill_cache_from_embedded(registry, cache);
    }
    const auto disk = run_children(argv[0], {"--child", "disk", dir}, runs, 4);
    table.row("(b) all on disk: every kernel launchable", ms(median(disk[2])), "nvcc's cubins, through the disk tier");
    table.row("disk cache, 200 units of nvcc cubins", mib(directory_bytes(dir)));
    remove_tree(dir);
  } else {
    table.row("(a), (b)", "not run", "no GPU here");
  }

  // (c) cold JIT: each run a new process and an empty cache.
  std::uint64_t peak = 0, jit_cache_bytes = 0;
  const unsigned most = *std::max_element(workers.begin(), workers.end());
  // Runs the table (or the units of `kernels`) cold; returns the median wall time and each run's trace.
  auto jit_row = [&](const std::string& what, std::vector<std::string> env, bool sample, unsigned pool_size,
                     const std::vector<std::string>& kernels = {}) {
    std::vector<double> wall;
    std::vector<TraceSummary> traces;
    // The memory is sampled in a run of its own, after the timed ones: /proc read every 20 ms costs the
    // cores the compiles share.
    const int timed = jit_runs > 0 ? jit_runs : runs;
    for (int r = 0; r < timed + (sample ? 1 : 0); ++r) {
      const bool sampling = sample && r == timed;
      const std::string dir = make_temp_dir("big-jit");
      env.push_back("KILN_CACHE_DIR=" + dir);
      env.push_back("KILN_JIT_TRACE=" + dir + "/trace.jsonl");
      std::uint64_t run_peak = 0;
      auto sampler = [&](pid_t pid) {
        if (!sampling) return;
        // Until the child's output closes: waitpid would reap it; kill(pid, 0) sees a zombie as alive.
        for (;;) {
          const std::uint64_t now = tree_rss(pid);
          if (now == 0) break;
          run_peak = std::max(run_peak, now);
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      };
      std::vector<std::string> args = {"--jit-child", std::to_string(arch)};
      args.insert(args.end(), kernels.begin(), kernels.end());
      const auto one = run_children(argv[0], args, 1, 2, env, sampler);
      env.pop_back();
      env.pop_back();
      if (!sampling) {
        wall.push_back(one[1][0]);
        traces.push_back(summarize_trace(dir + "/trace.jsonl", pool_size));
      }
      peak = std::max(peak, run_peak);
      if (kernels.empty()) jit_cache_bytes = directory_bytes(dir);
      remove_tree(dir);
    }
    table.row(what, ms(median(wall)), "sm_" + std::to_string(arch) + ", empty cache, new process");
    // The pool's trace of the same runs (medians over runs): where the wall time went.
    const auto of = [&](double TraceSummary::*field) {
      std::vector<double> v;
      for (const auto& t : traces) v.push_back(t.*field);
      return median(v);
    };
    if (of(&TraceSummary::span_ms) > 0) {
      char note[320];
      std::snprintf(note, sizeof note,
                    "trace: workers busy %.0f%% of %.0f ms from the first request (at %.1f ms); a request: NVRTC + "
                    "nvJitLink %.1f ms, the rest on its worker %.1f ms; worker start %.1f ms",
                    100 * of(&TraceSummary::busy), of(&TraceSummary::span_ms), of(&TraceSummary::first_ms),
                    of(&TraceSummary::compile_ms), of(&TraceSummary::exchange_ms), of(&TraceSummary::spawn_ms));
      table.row("    where its time went", "", note);
    }
    return std::pair{median(wall), traces};
  };
  double table_ms = 0, one_worker_ms = 0, one_worker_compilers_ms = 0;
  std::vector<TraceSummary> most_traces;
  for (unsigned w : workers) {
    auto [wall, traces] =
        jit_row("(c) all cold through JIT, " + std::to_string(w) + (w == 1 ? " worker process" : " worker processes"),
                {"KILN_JIT_WORKERS=" + std::to_string(w)}, w == most, w);
    if (w == 1) {
      one_worker_ms = wall;
      std::vector<double> totals;
      for (const auto& t : traces) totals.push_back(t.compile_total_ms);
      one_worker_compilers_ms = median(totals);
    }
    if (w == most) table_ms = wall, most_traces = std::move(traces);
  }
  // One worker against the same units compiled serially in one process: kiln's in-process JIT on one
  // thread (NVRTC + nvJitLink with kiln's options, no worker), and the compilers' own time in the
  // worker's trace. A laptop's or a 2-core CI runner's cold start is the first row.
  if (one_worker_ms > 0) {
    const double serial = jit_row("(c) all cold, 1 in-process thread: NVRTC + nvJitLink serially, no worker",
                                  {"KILN_JIT_WORKERS=1", "KILN_JITD=/nonexistent/kiln-jitd"}, false, 1)
                              .first;
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, "%.3f / %.3f", one_worker_ms / serial, one_worker_ms / one_worker_compilers_ms);
    table.row("(c) 1 worker / 1 in-process thread / the compilers' own time", ratio,
              "medians of the rows above; the compilers' time: NVRTC + nvJitLink of every request, as the "
              "worker measured them, summed (" + std::to_string(static_cast<long>(one_worker_compilers_ms)) + " ms)");
  }
  // The bound no schedule beats: the unit the table ended with, alone in a new process with the same
  // workers (T). Every unit of the table has one kernel named as the unit (big_registry/make_table.py).
  std::map<std::string, int> last_units;  // how many runs ended with each unit
  for (const auto& t : most_traces)
    if (!t.last_unit.empty()) ++last_units[t.last_unit];
  if (!last_units.empty()) {
    const std::string unit = std::max_element(last_units.begin(), last_units.end(), [](const auto& a, const auto& b) {
                               return a.second < b.second;
                             })->first;
    const std::string kernel = unit.substr(unit.find('/') + 1);
    const double alone = jit_row("(c) the unit it ended with alone (T): " + kernel + ", " + std::to_string(most) +
                                     " worker processes",
                                 {"KILN_JIT_WORKERS=" + std::to_string(most)}, false, most, {kernel})
                             .first;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2f", table_ms / alone);
    table.row("(c) all cold, " + std::to_string(most) + " workers, / T", ratio,
              "the table's wall over its last unit's alone, medians of the rows above");
  }
  jit_row("(c) all cold through JIT, 16 in-process threads",
          {"KILN_JIT_WORKERS=16", "KILN_JITD=/nonexistent/kiln-jitd"}, false, 16);

  // Footprint.
  std::map<std::string, std::uint64_t> per_arch;
  for (const auto& b : catalog.binaries)
    per_arch[(b.kind == kiln::BinaryKind::ptx ? "compute_" : "sm_") + std::to_string(b.arch)] += b.size;
  for (const auto& [label, bytes] : per_arch) table.row("embedded binaries, " + label, mib(bytes), "200 units");
  table.row("disk cache, 200 units of JIT cubins", mib(jit_cache_bytes));
  if (peak)
    table.row("peak host memory, " + std::to_string(most) + "-worker cold JIT", mib(peak),
              "the process and its workers, /proc sampled every 20 ms (a run of its own)");

  std::fputs(table.md.str().c_str(), stdout);
  if (!csv_path.empty()) {
    std::ofstream csv(csv_path);
    csv << "what,value,note\n" << table.csv.str();
  }
  return 0;
}
