// Programs given at run time against CuPy's RawModule on the same sources (bench/cupy_programs.py): each
// program cold (an empty cache directory, a fresh process), its disk hit in a new process, and in that
// process the in-memory hit by handle (Program::get) and by content (kiln::program of the same text,
// hashing and comparing included, then get).
//
//   bench_programs [--runs N] [--export SOURCES.json]    (--export: the sources, for cupy_programs.py)
//
// Each child makes its CUDA context first and times it apart; medians of N fresh processes per row.
#include <kiln/cache.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/program.hpp>

#include "bench_util.hpp"
#include "program_cases.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

using Case = kiln::bench::ProgramCase;

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// In a fresh process: context, then the program's first get; in the disk-hit run also the memory hits.
int child(std::size_t index, bool hits) {
  const auto t0 = std::chrono::steady_clock::now();
  CUcontext context = nullptr;
  CUdevice device = 0;
  kiln::check(kiln::driver().cuDeviceGet(&device, 0), "cuDeviceGet");
  kiln::check(kiln::driver().cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  kiln::check(kiln::driver().cuCtxSetCurrent(context), "cuCtxSetCurrent");
  const double context_ms = ms_since(t0);
  const Case c = kiln::bench::program_cases()[index];
  const auto t1 = std::chrono::steady_clock::now();
  auto program = kiln::program(c.source);
  const kiln::Kernel k = program->get(c.source.name_expressions[0]);
  const double first_ms = ms_since(t1);
  double handle_ns = 0, content_ns = 0;
  if (hits) {
    constexpr int kGets = 200000;
    const auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < kGets; ++i) {
      const kiln::Kernel again = program->get(c.source.name_expressions[0]);
      asm volatile("" : : "r"(again.kernel) : "memory");
    }
    handle_ns = ms_since(t2) * 1e6 / kGets;
    constexpr int kFinds = 20000;
    const auto t3 = std::chrono::steady_clock::now();
    for (int i = 0; i < kFinds; ++i) {
      const kiln::Kernel again = kiln::program(c.source)->get(c.source.name_expressions[0]);
      asm volatile("" : : "r"(again.kernel) : "memory");
    }
    content_ns = ms_since(t3) * 1e6 / kFinds;
  }
  std::printf("%.6f %.6f %.3f %.3f %s\n", context_ms, first_ms, handle_ns, content_ns,
              std::string(kiln::to_string(k.provenance.source)).c_str());
  return 0;
}

std::vector<double> run_child(std::size_t index, bool hits, const std::string& cache_dir) {
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) std::exit(1);
  const std::string i = std::to_string(index);
  char* argv[] = {self, const_cast<char*>(hits ? "--child-hits" : "--child"), const_cast<char*>(i.c_str()), nullptr};
  setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);
  setenv("KILN_REMOTE_CACHE", "", 1);
  const std::string out_path = cache_dir + ".out";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  if (posix_spawn(&pid, self, &actions, nullptr, argv, environ) != 0) std::exit(1);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(out_path);
  std::vector<double> v(4);
  for (double& x : v) in >> x;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !in) {
    std::fprintf(stderr, "bench_programs: a child failed\n");
    std::exit(1);
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(std::stoul(argv[2]), false);
  if (argc == 3 && std::strcmp(argv[1], "--child-hits") == 0) return child(std::stoul(argv[2]), true);
  int runs = 5;
  std::string export_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--export") == 0) export_path = argv[i + 1];
  }
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("bench_programs: no GPU (%s)\n", e.what());
    return 77;
  }
  const std::vector<Case> all = kiln::bench::program_cases();
  if (!export_path.empty()) {
    std::ofstream out(export_path);
    out << "[";
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto& s = all[i].source;
      out << (i ? ",\n" : "") << "{\"name\": " << json_string(all[i].name) << ", \"source\": " << json_string(s.source)
          << ", \"expression\": " << json_string(s.name_expressions[0]) << ", \"options\": [";
      for (std::size_t o = 0; o < s.options.size(); ++o) out << (o ? ", " : "") << json_string(s.options[o]);
      out << "]}";
    }
    out << "]\n";
  }
  std::printf("| program | cold get, new process (ms) | disk hit, new process (ms) | memory, by handle (ns) | by content (ns) |\n");
  std::printf("|---|---|---|---|---|\n");
  for (std::size_t i = 0; i < all.size(); ++i) {
    std::vector<double> cold, disk, handle, content;
    for (int r = 0; r < runs; ++r) {
      const std::string dir = kiln::bench::make_temp_dir("kiln-bench-programs");
      cold.push_back(run_child(i, false, dir)[1]);
      const std::vector<double> hit = run_child(i, true, dir);
      disk.push_back(hit[1]);
      handle.push_back(hit[2]);
      content.push_back(hit[3]);
      kiln::bench::remove_tree(dir);
    }
    std::printf("| %s | %.1f | %.3f | %.1f | %.1f |\n", all[i].name, median(cold), median(disk), median(handle), median(content));
  }
  return 0;
}
