// A simulated fleet on one machine: processes with separate, empty cache directories (as separate
// machines have), one Redis, the same cold units, each asking the tier chain as Registry::get does (disk,
// remote, JIT with the real NVRTC; no GPU needed).
//
//   remote_fleet [--scenario NAME]...    (default: all of them, in this order)
//
//   cold      16 processes x 20 units (vector_add and scale for 10 architectures): each unit compiled
//             exactly once in the whole fleet; every process ends with every unit on its disk, loadable
//   killed    4 processes x 4 units; the server is SIGKILLed when the first compile is done
//   silent    4 x 4 against a server that accepts connections and never answers
//   garbage   4 x 4 against a server that answers garbage
//   full      4 x 4 against a Redis over its maxmemory with noeviction
//   dead      4 x 4; every unit's lease is held by a "holder" that never publishes (PX 1500): the
//             fleet waits for the expiry, then compiles each unit once
//   altered   4 x 4; every unit's entry in Redis is altered before the processes start: each is
//             rejected (one warning per process), compiled once more and published again
//   s3        16 x 20 on an S3 store alone (tests/cpu/object_server.py, SigV4 and conditional writes):
//             lease objects by conditional PUT; each unit compiled exactly once
//   nginx     16 x 20 on nginx over TLS alone, whose dav module ignores If-None-Match: lease objects
//             looked at and read back; a unit may be compiled by more than one process, the fleet still
//             compiles at most a fifth of what its processes would alone
//
// In every scenario every process must end with every unit correct and loadable from its own disk
// cache, within the scenario's time bound; a process warns at most once per kind (the circuit breaker
// makes a dead or mute server cost one failed call per process). Prints one table row per scenario.
// Exits 0 when all held, 1 otherwise, 77 when redis-server is not installed (scripts/setup.sh installs it);
// the s3 and nginx scenarios are skipped (said in their row) without python3, or nginx and openssl.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/remote.hpp>

#include "cache_test_util.hpp"
#include "registry/query.hpp"  // make_chain, unit_cache_key with a DiskCache
#include "examples_catalog.hpp"
#include "http_servers.hpp"  // redis-server, nginx, object_server.py
#include "redis_server.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<const char*, 2> kKernels = {"vector_add", "scale_f32"};  // cheap units: ~0.1-0.2 s each
constexpr std::array<unsigned, 10> kArchs = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110};

struct Unit {
  const kiln::KernelEntry* kernel;
  unsigned arch;
  std::string name() const {
    return std::string(kiln::examples::catalog().str(kernel->name)) + "@sm_" + std::to_string(arch);
  }
  kiln::CacheKey key() const {
    const kiln::Catalog& c = kiln::examples::catalog();
    return kiln::detail::unit_cache_key(c, c.units[kernel->unit], arch, kiln::default_cache());
  }
};

// The first `count` units: kernel-major over the architectures, two kernels per architecture.
std::vector<Unit> units(int count) {
  std::vector<Unit> out;
  for (unsigned arch : kArchs)
    for (const char* name : kKernels)
      if (static_cast<int>(out.size()) < count) out.push_back({kiln::examples::catalog().find(name), arch});
  return out;
}

void append_line(const std::string& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

// --child URL KEY CACHE_DIR UNITS LOG GO: waits for the file GO (the starting gun), fetches every unit
// through the chain, logs each it compiled to LOG, checks every unit is loadable from its disk, and
// prints "compiled remote errors rejected refused skipped lease_waits warnings".
int child_main(char** args) {
  const std::string url = args[0], key = args[1], dir = args[2], log = args[4], go = args[5];
  const int count = std::atoi(args[3]);
  for (int i = 0; i < 30000 && ::access(go.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kiln::DiskCache disk(kiln::test::config_at(dir));
  kiln::RemoteConfig config;
  config.url = url;
  config.fleet_key = key;
  if (const char* auth = std::getenv("KILN_REMOTE_AUTH_FILE")) config.auth_file = auth;
  kiln::RemoteCache remote(config);
  const kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = true, .remote = &remote};
  const kiln::detail::TierChain chain = kiln::detail::make_chain(kiln::examples::catalog(), options);
  int failures = 0, compiled = 0, from_remote = 0;
  for (const Unit& u : units(count)) {
    try {
      const kiln::detail::UnitImage image = chain.fetch(chain.query(*u.kernel, u.arch));
      if (image.source == kiln::Tier::jit) {
        ++compiled;
        append_line(log, u.name() + " " + std::to_string(::getpid()));
      }
      from_remote += image.source == kiln::Tier::remote;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "remote_fleet child %d: FAILED: %s: %s\n", ::getpid(), u.name().c_str(), e.what());
      ++failures;
    }
  }
  // What a new process on this machine would find: every unit, from disk.
  for (const Unit& u : units(count)) {
    const auto entry = disk.load(u.key());
    const kiln::Catalog& c = kiln::examples::catalog();
    if (!entry || !kiln::detail::entry_serves_unit(c, u.kernel->unit, *entry)) {
      std::fprintf(stderr, "remote_fleet child %d: FAILED: %s is not loadable from %s\n", ::getpid(), u.name().c_str(), dir.c_str());
      ++failures;
    }
  }
  const kiln::RemoteStats s = remote.stats();
  std::printf("%d %d %llu %llu %llu %llu %llu %zu\n", compiled, from_remote, static_cast<unsigned long long>(s.errors),
              static_cast<unsigned long long>(s.rejected), static_cast<unsigned long long>(s.refused),
              static_cast<unsigned long long>(s.skipped), static_cast<unsigned long long>(s.lease_waits),
              remote.warnings().size());
  return failures == 0 ? 0 : 1;
}

struct ChildResult {
  int compiled = 0, from_remote = 0;
  unsigned long long errors = 0, rejected = 0, refused = 0, skipped = 0, lease_waits = 0;
  std::size_t warnings = 0;
  bool ok = false;
};

struct Fleet {
  int processes = 4;
  int units = 4;
  std::string url;
  std::string key = kiln::test::kFleetKey;
  std::chrono::seconds bound{120};
  // Called once the processes run (the starting gun fired), with the compile log's path.
  std::function<void(const std::string& log)> meanwhile;
};

struct FleetRun {
  std::vector<ChildResult> children;
  std::map<std::string, int> compiles;  // unit -> times compiled in the whole fleet
  double seconds = 0;
  bool in_time = false;
};

FleetRun run_fleet(const Fleet& f) {
  kiln::test::TempDir tmp;
  const std::string log = (tmp.path() / "compiles.log").string();
  const std::string go = (tmp.path() / "go").string();
  struct Running {
    pid_t pid;
    std::string out;
  };
  std::vector<Running> running;
  for (int p = 0; p < f.processes; ++p) {
    const std::string out = (tmp.path() / ("child-" + std::to_string(p) + ".out")).string();
    const std::vector<std::string> args = {"remote_fleet", "--child", f.url, f.key,
                                           (tmp.path() / ("cache-" + std::to_string(p))).string(),
                                           std::to_string(f.units), log, go};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    if (::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&actions);
    running.push_back({pid, out});
  }
  const auto start = Clock::now();
  append_line(go, "go");
  if (f.meanwhile) f.meanwhile(log);
  FleetRun run;
  const auto deadline = start + f.bound;
  for (const Running& r : running) {
    int status = -1;
    while (r.pid > 0 && ::waitpid(r.pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(r.pid, SIGKILL);
        ::waitpid(r.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ChildResult c;
    std::istringstream in(kiln::test::read_bytes(r.out));
    in >> c.compiled >> c.from_remote >> c.errors >> c.rejected >> c.refused >> c.skipped >> c.lease_waits >> c.warnings;
    c.ok = bool(in) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    run.children.push_back(c);
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.in_time = Clock::now() <= deadline;
  std::istringstream lines(kiln::test::read_bytes(log));
  for (std::string unit, pid; lines >> unit >> pid;) ++run.compiles[unit];
  return run;
}

// Checks what every scenario must hold, and the scenario's own `expect`; prints one row.
bool report(const std::string& name, const Fleet& f, const FleetRun& run,
            const std::function<bool(const FleetRun&, std::string&)>& expect) {
  std::string problems;
  int total = 0;
  for (const auto& [unit, n] : run.compiles) total += n;
  int failed = 0;
  unsigned long long errors = 0, rejected = 0, refused = 0, waits = 0, remote = 0;
  for (const ChildResult& c : run.children) {
    failed += !c.ok;
    errors += c.errors;
    rejected += c.rejected;
    refused += c.refused;
    waits += c.lease_waits;
    remote += static_cast<unsigned long long>(c.from_remote);
    if (c.warnings > 3) problems += " a process warned " + std::to_string(c.warnings) + " times;";
  }
  if (failed) problems += " " + std::to_string(failed) + " processes failed or ended wrong;";
  if (!run.in_time) problems += " over the time bound of " + std::to_string(f.bound.count()) + " s;";
  for (const auto& [unit, n] : run.compiles)
    if (n > f.processes) problems += " " + unit + " compiled " + std::to_string(n) + " times;";
  std::string expected;
  if (!expect(run, expected)) problems += " " + expected + ";";
  std::printf("| %s | %d x %d | %.1f s | %d | %llu | %llu | %llu | %llu | %llu | %s |\n", name.c_str(), f.processes,
              f.units, run.seconds, total, remote, waits, errors, rejected, refused,
              problems.empty() ? "ok" : ("FAILED:" + problems).c_str());
  std::fflush(stdout);
  return problems.empty();
}

// Each unit compiled exactly `times` in the whole fleet.
std::function<bool(const FleetRun&, std::string&)> compiled_exactly(int units, int times) {
  return [=](const FleetRun& run, std::string& why) {
    bool ok = static_cast<int>(run.compiles.size()) == units;
    for (const auto& [unit, n] : run.compiles) ok = ok && n == times;
    why = "expected each of " + std::to_string(units) + " units compiled exactly " + std::to_string(times) +
          " time(s), got " + std::to_string(run.compiles.size()) + " units compiled";
    for (const auto& [unit, n] : run.compiles)
      if (n != times) why += ", " + unit + " " + std::to_string(n) + " times";
    return ok;
  };
}

// The breaker at work: each process made one failed call, at most, and skipped the rest.
bool one_failure_each(const FleetRun& run, std::string& why) {
  why = "expected at most one failed call per process (the circuit breaker)";
  for (const ChildResult& c : run.children)
    if (c.errors > 1) return false;
  return true;
}

// 16 x 20 cold on an object store alone, its credential (if any) in KILN_REMOTE_AUTH_FILE for the children.
bool object_store_scenario(const std::string& name) {
  if (name == "s3" ? kiln::test::python_path().empty()
                   : kiln::test::nginx_path().empty() || kiln::test::openssl_path().empty()) {
    std::printf("| %s | | | | | | | | | skipped: %s is not installed |\n", name.c_str(), name == "s3" ? "python3" : "nginx or openssl");
    return true;
  }
  Fleet f;
  f.processes = 16;
  f.units = 20;
  f.bound = std::chrono::seconds(240);
  kiln::test::ScratchDir secrets;
  if (name == "s3") {
    kiln::test::ObjectServer server("s3");
    const auto credentials = kiln::test::write_secret(
        secrets.path() / "credentials", std::string("aws_access_key_id = ") + kiln::test::ObjectServer::kAccessKey +
                                            "\naws_secret_access_key = " + kiln::test::ObjectServer::kSecretKey + "\n");
    ::setenv("KILN_REMOTE_AUTH_FILE", credentials.c_str(), 1);
    f.url = server.s3_url("kiln-cache/fleet");
    const bool held = report(name, f, run_fleet(f), compiled_exactly(f.units, 1));
    ::unsetenv("KILN_REMOTE_AUTH_FILE");
    return held;
  }
  kiln::test::NginxServer server;
  f.url = server.url("open/fleet");
  return report(name, f, run_fleet(f), [&](const FleetRun& run, std::string& why) {
    int total = 0;
    for (const auto& [unit, n] : run.compiles) total += n;
    why = "expected every unit compiled, " + std::to_string(f.processes * f.units / 5) + " compiles at most, got " +
          std::to_string(total) + " for " + std::to_string(run.compiles.size()) + " units";
    return static_cast<int>(run.compiles.size()) == f.units && total <= f.processes * f.units / 5;
  });
}

bool scenario(const std::string& name) {
  if (name == "s3" || name == "nginx") return object_store_scenario(name);
  kiln::test::RedisServer server;
  Fleet f;
  f.url = server.url();
  if (name == "cold") {
    f.processes = 16;
    f.units = 20;
    f.bound = std::chrono::seconds(240);
    return report(name, f, run_fleet(f), compiled_exactly(20, 1));
  }
  if (name == "killed") {
    f.url = server.url("timeout_ms=500&connect_timeout_ms=500");
    f.meanwhile = [&](const std::string& log) {
      for (int i = 0; i < 60000 && kiln::test::read_bytes(log).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      server.kill();
    };
    return report(name, f, run_fleet(f), [](const FleetRun& run, std::string& why) { return one_failure_each(run, why); });
  }
  if (name == "silent" || name == "garbage") {
    kiln::test::FakeServer fake(name == "silent" ? kiln::test::FakeServer::Mode::silent : kiln::test::FakeServer::Mode::garbage);
    f.url = fake.url("timeout_ms=300&connect_timeout_ms=300");
    return report(name, f, run_fleet(f), [&](const FleetRun& run, std::string& why) {
      if (!one_failure_each(run, why)) return false;
      why = "expected every unit compiled by every process";
      return compiled_exactly(f.units, f.processes)(run, why);
    });
  }
  if (name == "full") {
    kiln::test::RedisClient redis(server.port());
    const std::string ballast(64 * 1024, 'x');
    for (int i = 0; i < 64; ++i) redis.command({"SET", "ballast:" + std::to_string(i), ballast});
    redis.command({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    redis.command({"CONFIG", "SET", "maxmemory", "2mb"});
    return report(name, f, run_fleet(f), [](const FleetRun& run, std::string& why) {
      why = "expected refusals, not failures";
      unsigned long long refused = 0, errors = 0;
      for (const ChildResult& c : run.children) refused += c.refused, errors += c.errors;
      return refused > 0 && errors == 0;
    });
  }
  if (name == "dead") {
    kiln::test::RedisClient redis(server.port());
    for (const Unit& u : units(f.units)) redis.command({"SET", kiln::test::lease_name(u.key().hex), "a-dead-holder", "PX", "1500"});
    return report(name, f, run_fleet(f), [&](const FleetRun& run, std::string& why) {
      if (!compiled_exactly(f.units, 1)(run, why)) return false;
      why = "expected the fleet to wait for the dead holder's lease to expire";
      return run.seconds >= 1.4;
    });
  }
  if (name == "altered") {
    // A first machine fills the remote, then someone alters every entry in it.
    Fleet seed = f;
    seed.processes = 1;
    if (!report("altered (seed)", seed, run_fleet(seed), compiled_exactly(f.units, 1))) return false;
    kiln::test::RedisClient redis(server.port());
    for (const Unit& u : units(f.units)) {
      const std::string name_in_redis = kiln::test::entry_name(u.key().hex);
      std::string value = redis.command({"GET", name_in_redis});
      value[value.size() / 2] = static_cast<char>(value[value.size() / 2] ^ 0x10);
      redis.command({"SET", name_in_redis, value});
    }
    return report(name, f, run_fleet(f), [&](const FleetRun& run, std::string& why) {
      if (!compiled_exactly(f.units, 1)(run, why)) return false;
      why = "expected the altered entries rejected";
      unsigned long long rejected = 0;
      for (const ChildResult& c : run.children) rejected += c.rejected;
      return rejected >= static_cast<unsigned long long>(f.units);
    });
  }
  std::fprintf(stderr, "remote_fleet: no scenario '%s'\n", name.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 8 && std::strcmp(argv[1], "--child") == 0) return child_main(argv + 2);
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--scenario") == 0 && i + 1 < argc) {
      names.emplace_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--scenario cold|killed|silent|garbage|full|dead|altered|s3|nginx]...\n", argv[0]);
      return 2;
    }
  }
  if (names.empty()) names = {"cold", "killed", "silent", "garbage", "full", "dead", "altered", "s3", "nginx"};
  if (kiln::test::redis_server_path().empty()) {
    std::printf("remote_fleet: skipped: redis-server is not installed (scripts/setup.sh installs it)\n");
    return 77;
  }
  std::printf("| scenario | processes x units | wall | compiles | from remote | lease waits | errors | rejected | "
              "refused | result |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  bool ok = true;
  for (const std::string& name : names) ok = scenario(name) && ok;
  return ok ? 0 : 1;
}
