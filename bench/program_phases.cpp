// Where a program's disk hit in a new process spends its time before the driver's load, without a GPU:
// each phase of the path kiln::program(...)->get() takes up to the cubin handed to cuLibraryLoadData,
// timed in a fresh process per run (medians), for the programs of program_cases.hpp compiled for sm_90
// into a cache directory first (NVRTC; no GPU needed).
//
//   bench_program_phases [--runs N] [--dir DIR]    (--dir: the cache directory to fill and keep; a new one
//                                                  removed at the end otherwise)
//
// Phases, in the order the path meets them, each the first of its kind in its process:
//   digest         the program's digest (SHA-256 of its source, headers, options, expressions)
//   CCCL probe     the toolkit's CCCL directory and version (the key names CCCL's version)
//   program        kiln::program(source): the digest again, the catalog of one unit, the registry
//   cache open     the disk cache from the environment (KILN_CACHE_DIR), its directory opened
//   compilers      the NVRTC and nvJitLink versions the key names (the disk cache's record, or a dlopen)
//   key            the unit's cache key
//   disk read      the disk tier: the entry read, decompressed, checked against the unit
// Then the whole path in other fresh processes: kiln::program and the chain, as a get() with its context
// already current takes it; and the same through the prefetch thread a registry starts when its context
// comes up with the get (the thread's start and the hand-over, which a context's creation hides).
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/precompile.hpp>
#include <kiln/program.hpp>

#include "program/program_key.hpp"
#include "registry/prefetch.hpp"
#include "registry/query.hpp"

#include "bench_util.hpp"
#include "program_cases.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::bench::median;
using kiln::bench::now_ms;

constexpr unsigned kArch = 90;
constexpr int kPhases = 7;
constexpr const char* kPhaseNames[kPhases] = {"digest", "CCCL probe", "program", "cache open",
                                              "compilers", "key", "disk read"};

kiln::RegistryOptions disk_only() {
  kiln::RegistryOptions o;
  o.use_jit = false;
  o.allow_ptx = false;
  o.use_remote = false;
  return o;
}

bool nvrtc_mapped() {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  bool mapped = false;
  char line[1024];
  while (maps != nullptr && std::fgets(line, sizeof line, maps) != nullptr)
    mapped = mapped || std::strstr(line, "libnvrtc") != nullptr || std::strstr(line, "libnvJitLink") != nullptr;
  if (maps != nullptr) std::fclose(maps);
  return mapped;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// `--phases STAMP CASE`: each phase timed in turn; prints their ms, their sum, whether NVRTC or nvJitLink
// got mapped, and the minor page faults of the whole path.
int phases_child(std::size_t index) {
  const kiln::ProgramSource source = kiln::bench::program_cases()[index].source;
  const kiln::RegistryOptions options = disk_only();
  double t[kPhases + 1];
  const long faults = minor_faults();
  t[0] = now_ms();
  (void)kiln::detail::program_digest(source);
  t[1] = now_ms();
  (void)kiln::detail::toolkit_headers();
  t[2] = now_ms();
  const auto program = kiln::program(source, 0, options);
  t[3] = now_ms();
  kiln::DiskCache& cache = kiln::default_cache();
  t[4] = now_ms();
  const kiln::detail::CompilerVersions versions = kiln::detail::compilers_for(cache);
  t[5] = now_ms();
  const kiln::Catalog& c = program->catalog();
  (void)kiln::detail::unit_cache_key(c, c.units[0], kArch, versions);
  t[6] = now_ms();
  const kiln::detail::TierChain chain = kiln::detail::make_chain(c, options);
  const kiln::detail::UnitImage image = chain.fetch(chain.query(c.kernels[0], kArch));
  t[7] = now_ms();
  if (image.tier != kiln::Tier::disk) return 1;
  const long faulted = minor_faults() - faults;
  for (int i = 0; i < kPhases; ++i) std::printf("%.6f ", t[i + 1] - t[i]);
  std::printf("%.6f %d %ld\n", t[kPhases] - t[0], nvrtc_mapped() ? 1 : 0, faulted);
  return 0;
}

// `--path STAMP CASE THREAD`: kiln::program, then the unit's image from the chain: read by this thread
// (THREAD 0), or by a prefetch thread and taken from it (THREAD 1), as Registry::get does.
int path_child(std::size_t index, bool thread) {
  const kiln::ProgramSource source = kiln::bench::program_cases()[index].source;
  const kiln::RegistryOptions options = disk_only();
  const double t0 = now_ms();
  const auto program = kiln::program(source, 0, options);
  const kiln::Catalog& c = program->catalog();
  const kiln::detail::TierChain chain = kiln::detail::make_chain(c, options);
  std::optional<kiln::detail::Prefetch> prefetch;
  if (thread) prefetch.emplace(chain, kArch);
  std::optional<kiln::detail::UnitImage> image = prefetch ? prefetch->take(0) : std::nullopt;
  if (!image) image = chain.fetch(chain.query(c.kernels[0], kArch));
  const double t1 = now_ms();
  if (image->tier != kiln::Tier::disk) return 1;
  std::printf("%.6f\n", t1 - t0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--phases") == 0) return phases_child(std::stoul(argv[3]));
  if (argc == 5 && std::strcmp(argv[1], "--path") == 0) return path_child(std::stoul(argv[3]), argv[4][0] == '1');
  int runs = 11;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--dir") == 0) dir = argv[i + 1];
  }
  const bool keep = !dir.empty();
  if (!keep) dir = kiln::bench::make_temp_dir("program-phases");
  const std::vector<std::string> env{"KILN_CACHE_DIR=" + dir, "KILN_REMOTE_CACHE=", "KILN_RECORD="};
  for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
  const std::vector<kiln::bench::ProgramCase> all = kiln::bench::program_cases();
  std::printf("A program's disk hit in a new process, up to the driver's load, without a GPU: sm_%u; medians of "
              "%d fresh processes (ms)\n\n| program |",
              kArch, runs);
  for (const char* name : kPhaseNames) std::printf(" %s |", name);
  std::printf(" the path | through a prefetch thread | NVRTC loaded | minor faults |\n|---|");
  for (int i = 0; i < kPhases + 4; ++i) std::printf("---:|");
  std::printf("\n");
  int status = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    try {
      const kiln::PrecompileResult filled = kiln::Program(all[i].source, 0, disk_only()).precompile(kArch);
      if (!filled.ok) throw std::runtime_error("the cache did not keep it: " + filled.error.message);
      const std::string index = std::to_string(i);
      const auto phases = kiln::bench::run_children(argv[0], {"--phases", index}, runs, kPhases + 3, env);
      const auto direct = kiln::bench::run_children(argv[0], {"--path", index, "0"}, runs, 1, env);
      const auto threaded = kiln::bench::run_children(argv[0], {"--path", index, "1"}, runs, 1, env);
      std::printf("| %s |", all[i].name);
      for (int p = 0; p < kPhases; ++p) std::printf(" %.3f |", median(phases[p]));
      std::printf(" %.3f | %.3f | %s | %.0f |\n", median(direct[0]), median(threaded[0]),
                  median(phases[kPhases + 1]) > 0 ? "yes" : "no", median(phases[kPhases + 2]));
    } catch (const std::exception& e) {
      std::printf("| %s | failed: %s |\n", all[i].name, e.what());
      status = 1;
    }
  }
  if (!keep) kiln::bench::remove_tree(dir);
  return status;
}
