// Many processes and threads on one cache directory for a fixed time, then checks that nothing was lost, built twice or left behind.
//
//   cache_soak [--processes N] [--threads M] [--seconds S] [--no-jit]
//
// The parent fills a fresh cache directory with entries, then starts N copies of itself (new processes,
// not forks, as independent programs sharing a cache would be), each running M threads until the time is
// up. Each thread draws one operation at a time:
//   get     load an entry the parent stored: must hit, and be the same entry
//   cold    get_or_build of a key nobody has built yet (a window of keys that moves with the clock, so
//           that every process contends for the same few at once); the build sleeps a little, like a compile
//   jit     get_or_build of an example unit for one of 12 architectures, built by the real JIT tier
//           (NVRTC and nvJitLink in kiln-jitd workers; no GPU needed)
//   prune   prune to the cap: may remove stray files, never a good entry or a file in use
//   verify  verify every entry: none may be bad
// Every build appends a line to a shared log. Afterwards the parent checks: every process exited 0 (no
// request failed, no entry differed, no warning, nothing corrupt), each key was built at most once, every
// entry of the directory verifies, and no temp or lock file is left. It prints a table of the counts.
// Exits 0 when all of that held, 1 otherwise.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>

#include "cache_test_util.hpp"
#include "examples_catalog.hpp"
#include "registry/query.hpp"  // unit_cache_key with a DiskCache
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using kiln::test::sample_entry;
using kiln::test::sample_key;

constexpr int kExisting = 32;           // entries the parent stores before the children start
constexpr int kColdBase = 1000;         // cold keys are sample_key(kColdBase + i)
constexpr int kColdWindow = 6;          // keys contended for at any moment
constexpr auto kColdStep = std::chrono::milliseconds(40);  // how often the window moves on by one key
constexpr std::array<unsigned, 12> kJitArchs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};  // CUDA 13's
constexpr std::array<const char*, 2> kJitKernels = {"vector_add", "scale_f32"};  // cheap units: ~0.1 s each

// What one process did; the parent adds them up. The order is the order of the line a child prints.
struct Counts {
  std::uint64_t gets = 0, colds = 0, cold_built = 0, jits = 0, jit_built = 0, prunes = 0, strays = 0, verifies = 0,
                verified = 0, failures = 0;

  static constexpr int kFields = 10;
  std::uint64_t* field(int i) {
    std::uint64_t* all[] = {&gets, &colds, &cold_built, &jits, &jit_built, &prunes, &strays, &verifies, &verified, &failures};
    return all[i];
  }
  void add(Counts& o) {
    for (int i = 0; i < kFields; ++i) *field(i) += *o.field(i);
  }
  std::string line() {
    std::string s;
    for (int i = 0; i < kFields; ++i) {
      if (i > 0) s += ' ';
      s += std::to_string(*field(i));
    }
    return s;
  }
  bool parse(const std::string& text) {
    std::istringstream in(text);
    for (int i = 0; i < kFields; ++i)
      if (!(in >> *field(i))) return false;
    return true;
  }
};

// One line per build, appended with O_APPEND so that lines of different processes never interleave.
void record_build(const std::string& log, const std::string& what) {
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  const std::string line = what + " " + std::to_string(::getpid()) + "\n";
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
}

// Per-thread tallies: no shared counter on the hot path, so the soak measures the cache, not itself.
struct ThreadTally {
  Counts counts;
  std::vector<std::string> failures;
};

class Child {
 public:
  Child(std::filesystem::path root, std::string log, bool jit)
      : cache_(kiln::test::config_at(root)), log_(std::move(log)), jit_(jit) {}

  void run(ThreadTally& t, Clock::time_point start, Clock::time_point deadline, unsigned seed) {
    std::mt19937 rng(seed);
    while (Clock::now() < deadline) {
      const unsigned r = rng() % 100;
      try {
        if (r < 60) get(t, rng);
        else if (r < 90) cold(t, rng, start);
        else if (r < 96) jit_ ? jit(t, rng) : cold(t, rng, start);
        else if (r < 98) prune(t);
        else verify(t);
      } catch (const std::exception& e) {
        fail(t, std::string("exception: ") + e.what());
      }
    }
  }

  kiln::DiskCache& cache() { return cache_; }

 private:
  static void fail(ThreadTally& t, std::string what) {
    ++t.counts.failures;
    if (t.failures.size() < 5) t.failures.push_back(std::move(what));
  }

  void get(ThreadTally& t, std::mt19937& rng) {
    const int k = static_cast<int>(rng() % kExisting);
    ++t.counts.gets;
    const auto entry = cache_.load(sample_key(k));
    if (!entry) return fail(t, "existing entry " + std::to_string(k) + " missed");
    if (!kiln::test::same_entry(*entry, sample_entry(k))) fail(t, "existing entry " + std::to_string(k) + " differs");
  }

  void cold(ThreadTally& t, std::mt19937& rng, Clock::time_point start) {
    const int window = static_cast<int>((Clock::now() - start) / kColdStep);
    const int k = kColdBase + window + static_cast<int>(rng() % kColdWindow);
    ++t.counts.colds;
    const auto entry = cache_.get_or_build(sample_key(k), [&] {
      ++t.counts.cold_built;
      record_build(log_, "cold:" + std::to_string(k));
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      return sample_entry(k, 90, 4096);
    });
    if (!kiln::test::same_entry(entry, sample_entry(k, 90, 4096))) fail(t, "cold entry " + std::to_string(k) + " differs");
  }

  void jit(ThreadTally& t, std::mt19937& rng) {
    const kiln::Catalog& catalog = kiln::examples::catalog();
    const char* kernel = kJitKernels[rng() % kJitKernels.size()];
    const unsigned arch = kJitArchs[rng() % kJitArchs.size()];
    const std::uint32_t unit = catalog.find(kernel)->unit;
    const kiln::CacheKey key = kiln::detail::unit_cache_key(catalog, catalog.units[unit], arch, cache_);
    const std::string name = "jit:" + std::string(catalog.str(catalog.units[unit].name)) + "@sm_" + std::to_string(arch);
    ++t.counts.jits;
    const kiln::CacheEntry entry = cache_.get_or_build(key, [&] {
      ++t.counts.jit_built;
      record_build(log_, name);
      return kiln::detail::jit_compile_entry(kiln::detail::make_request(catalog, unit, arch));
    });
    if (entry.arch != arch || entry.kernels.empty() || entry.cubin.empty()) fail(t, name + ": not the entry asked for");
  }

  void prune(ThreadTally& t) {
    ++t.counts.prunes;
    t.counts.strays += cache_.prune(cache_.config().max_bytes).stray_removed;
  }

  void verify(ThreadTally& t) {
    ++t.counts.verifies;
    const kiln::VerifyReport report = cache_.verify();
    t.counts.verified += report.checked;
    for (const auto& p : report.problems) fail(t, "verify: " + p);
  }

  kiln::DiskCache cache_;
  std::string log_;
  bool jit_;
};

// --child ROOT LOG SECONDS THREADS SEED JIT: prints its Counts line on stdout; exits 0 when nothing failed.
int child_main(char** argv) {
  const std::filesystem::path root = argv[0];
  const std::string log = argv[1];
  const double seconds = std::atof(argv[2]);
  const unsigned threads = static_cast<unsigned>(std::atoi(argv[3]));
  const unsigned seed = static_cast<unsigned>(std::atoi(argv[4]));
  const bool jit = std::strcmp(argv[5], "1") == 0;

  Child child(root, log, jit);
  if (!child.cache().usable()) {
    std::fprintf(stderr, "cache_soak child %d: cache not usable: %s\n", ::getpid(), child.cache().unusable_reason().message.c_str());
    return 1;
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<ThreadTally> tallies(threads);
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < threads; ++i)
    pool.emplace_back([&, i] { child.run(tallies[i], start, deadline, seed * 7919u + i); });
  for (auto& t : pool) t.join();

  Counts total;
  for (auto& t : tallies) {
    total.add(t.counts);
    for (const auto& f : t.failures) std::fprintf(stderr, "cache_soak child %d: FAILED: %s\n", ::getpid(), f.c_str());
  }
  const kiln::CacheStats stats = child.cache().stats();
  if (stats.corrupt != 0 || stats.store_failures != 0 || !child.cache().warnings().empty()) {
    std::fprintf(stderr, "cache_soak child %d: FAILED: %llu corrupt, %llu failed stores, %zu warnings\n", ::getpid(),
                 static_cast<unsigned long long>(stats.corrupt), static_cast<unsigned long long>(stats.store_failures),
                 child.cache().warnings().size());
    ++total.failures;
  }
  std::printf("%s\n", total.line().c_str());
  return total.failures == 0 ? 0 : 1;
}

struct Running {
  pid_t pid = -1;
  int out = -1;  // the read end of its stdout
};

Running spawn_child(const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Running r;
  const int rc = ::posix_spawn(&r.pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return {};
  }
  r.out = fds[0];
  return r;
}

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

int usage(const char* self) {
  std::fprintf(stderr, "usage: %s [--processes N] [--threads M] [--seconds S] [--no-jit]\n", self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 8 && std::strcmp(argv[1], "--child") == 0) return child_main(argv + 2);
  int processes = 4, threads = 4;
  double seconds = 20;
  bool jit = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-jit") jit = false;
    else if (i + 1 < argc && a == "--processes") processes = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--threads") threads = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--seconds") seconds = std::atof(argv[++i]);
    else return usage(argv[0]);
  }
  if (processes < 1 || threads < 1 || seconds <= 0) return usage(argv[0]);

  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  const std::string log = (tmp.path() / "builds.log").string();
  {
    kiln::DiskCache cache(kiln::test::config_at(root));
    for (int k = 0; k < kExisting; ++k)
      if (!cache.store(sample_key(k), sample_entry(k))) return std::fprintf(stderr, "cannot store entry %d\n", k), 1;
  }

  std::vector<Running> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(spawn_child({argv[0], "--child", root.string(), log, std::to_string(seconds),
                                    std::to_string(threads), std::to_string(p + 1), jit ? "1" : "0"}));
    if (children.back().pid < 0) return std::fprintf(stderr, "cannot start child %d\n", p), 1;
  }
  int failed = 0;
  Counts total;
  for (const Running& c : children) {
    const std::string out = read_all(c.out);
    ::close(c.out);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    Counts counts;
    const bool parsed = counts.parse(out);
    if (!parsed || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "cache_soak: FAILED: child %d ended with status %d, said '%s'\n", c.pid, status, out.c_str());
      ++failed;
    }
    total.add(counts);
  }

  // Each key built at most once by the whole group.
  std::map<std::string, int> builds;
  std::istringstream lines(kiln::test::read_bytes(log));
  for (std::string what, pid; lines >> what >> pid;) ++builds[what];
  int twice = 0;
  std::uint64_t logged = 0;
  for (const auto& [what, n] : builds) {
    logged += static_cast<std::uint64_t>(n);
    if (n > 1) ++twice, std::fprintf(stderr, "cache_soak: FAILED: %s built %d times\n", what.c_str(), n);
  }
  if (logged != total.cold_built + total.jit_built) {  // the log and the children's counts must agree
    std::fprintf(stderr, "cache_soak: FAILED: %llu builds logged, the children counted %llu\n",
                 static_cast<unsigned long long>(logged), static_cast<unsigned long long>(total.cold_built + total.jit_built));
    ++failed;
  }

  // Every entry verifies; every key built is there; nothing is left over.
  kiln::DiskCache cache(kiln::test::config_at(root));
  const kiln::VerifyReport report = cache.verify();
  for (const auto& p : report.problems) std::fprintf(stderr, "cache_soak: FAILED: verify: %s\n", p.c_str());
  const std::uint64_t expected_entries = kExisting + builds.size();
  const std::uint64_t entries = kiln::test::files_in(kiln::test::entries_dir(root), ".kiln").size();
  if (entries != expected_entries)
    std::fprintf(stderr, "cache_soak: FAILED: %llu entries, expected %llu\n", static_cast<unsigned long long>(entries),
                 static_cast<unsigned long long>(expected_entries));
  const auto leftovers = kiln::test::temp_and_lock_files(kiln::test::entries_dir(root));
  for (const auto& f : leftovers) std::fprintf(stderr, "cache_soak: FAILED: left behind: %s\n", f.c_str());
  failed += twice + static_cast<int>(report.problems.size()) + (entries != expected_entries) + static_cast<int>(leftovers.size());
  failed += total.failures > 0;

  std::printf("cache soak: %d processes x %d threads, %.0f s, JIT %s; %llu entries at the end, all verified\n\n", processes,
              threads, seconds, jit ? "on" : "off", static_cast<unsigned long long>(entries));
  std::printf("| operation | count |\n|---|---:|\n");
  const auto row = [](const char* what, std::uint64_t n) { std::printf("| %s | %llu |\n", what, static_cast<unsigned long long>(n)); };
  row("get of an existing entry (every one a hit, the same bytes)", total.gets);
  row("cold get_or_build", total.colds);
  row("  of which built (each key once in the group)", total.cold_built);
  row("JIT get_or_build (real NVRTC + nvJitLink)", total.jits);
  row("  of which compiled (each unit and arch once in the group)", total.jit_built);
  row("prune", total.prunes);
  row("  stray files it removed", total.strays);
  row("verify", total.verifies);
  row("  entries it checked (none bad)", total.verified);
  row("failed requests", total.failures);
  std::printf("\n%s\n", failed == 0 ? "cache soak: OK" : "cache soak: FAILED");
  return failed == 0 ? 0 : 1;
}
