// The remote tier for a fleet: N processes started at once, each with its own empty cache directory (as
// N machines), compile the 19-unit set (16 CUB-heavy units of bench/kernels/cub_units.toml and the
// examples) cold for sm_90, without and with a shared store on 127.0.0.1: a redis-server, nginx's WebDAV
// tree over TLS, tests/cpu/object_server.py as S3 (each started here); wall time of the fleet and of each
// process, total CPU seconds (every process and its JIT workers), and compiles per unit across the fleet.
// Then the time a new process takes to get one entry from Redis (the tier chain's step: GET, tag,
// decode, write to its disk), against a cold compile of the same unit. Needs no GPU. Prints Markdown tables.
//
//   bench_remote_fleet [--stores none,redis,https,s3] [--no-hits] [N...]
//                      (default: --stores none,redis, N = 1 4 16)
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>
#include <kiln/remote.hpp>

#include "bench_cub_catalog.hpp"
#include "examples_catalog.hpp"
#include "registry/query.hpp"  // make_chain, unit_cache_key with a DiskCache

#include "bench_util.hpp"
#include "http_servers.hpp"  // tests/cpu: redis-server, nginx, object_server.py on free 127.0.0.1 ports

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::children_cpu_seconds;
using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::reap_orphans;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

constexpr unsigned kArch = 90;
const std::string kKey = "bench-fleet-key-0123456789abcdef";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

const kiln::Catalog& catalog_named(const std::string& name) {
  return name == "examples" ? kiln::examples::catalog() : kiln::bench_cub::catalog();
}

// `--child STAMP precompile`: both registries for sm_90 into $KILN_CACHE_DIR (and the remote of the
// environment); prints wall ms, units compiled here, units from elsewhere, failures.
int child_precompile() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<kiln::PrecompileResult> results[2];
  std::thread examples([&] { results[1] = kiln::precompile(kiln::examples::catalog(), kArch); });
  results[0] = kiln::precompile(kiln::bench_cub::catalog(), kArch);
  examples.join();
  int compiled = 0, cached = 0, failed = 0;
  for (const auto& list : results)
    for (const auto& r : list) {
      compiled += r.ok && !r.cached;
      cached += r.ok && r.cached;
      failed += !r.ok;
      if (!r.ok) std::fprintf(stderr, "%s\n", r.error.message.c_str());
    }
  std::printf("%.3f %d %d %d\n", ms_since(start), compiled, cached, failed);
  return failed ? 1 : 0;
}

// `--child STAMP hit REGISTRY KERNEL`: the tier chain's answer for one unit, from the remote of the
// environment into the empty $KILN_CACHE_DIR, in this new process; prints its ms, the entry's bytes on
// disk, and whether the remote served it.
int child_hit(const std::string& registry, const std::string& kernel) {
  const kiln::Catalog& catalog = catalog_named(registry);
  kiln::DiskCache& disk = kiln::default_cache();
  const kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = false};
  const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog, options);
  const kiln::detail::UnitQuery query = chain.query(*catalog.find(kernel), kArch);
  const auto start = std::chrono::steady_clock::now();
  const kiln::detail::UnitImage image = chain.fetch(query);
  const double ms = ms_since(start);
  std::printf("%.4f %llu %d\n", ms, static_cast<unsigned long long>(disk.stats().bytes),
              image.tier == kiln::Tier::remote ? 1 : 0);
  return image.tier == kiln::Tier::remote ? 0 : 1;
}

// `--child STAMP fetch REGISTRY KERNEL`: only the remote's part of a hit in this new process (connect,
// GET, tag, decode; no disk); prints its ms.
int child_fetch(const std::string& registry, const std::string& kernel) {
  const kiln::Catalog& catalog = catalog_named(registry);
  const kiln::CacheKey key = kiln::detail::unit_cache_key(catalog, catalog.units[catalog.find(kernel)->unit], kArch, kiln::default_cache());
  const auto start = std::chrono::steady_clock::now();
  const bool hit = kiln::default_remote().load(key).has_value();
  std::printf("%.4f\n", ms_since(start));
  return hit ? 0 : 1;
}

// `--child STAMP cold REGISTRY KERNEL`: one unit compiled cold (no remote) in this new process; its ms.
int child_cold(const std::string& registry, const std::string& kernel) {
  const auto results = kiln::precompile(catalog_named(registry), kArch, {kernel}, 1);
  std::printf("%.3f\n", results.at(0).ms);
  return results.at(0).ok ? 0 : 1;
}

struct FleetRun {
  double wall_s = 0, cpu_s = 0;
  std::vector<double> process_s;  // each process's own wall, start to its last unit
  int compiled = 0, cached = 0;
  bool ok = true;
};

// A shared store of the fleet: its name in the table, its URL, and an S3 store's credentials file.
struct Store {
  std::string name, url, auth_file;
};

// N processes at once, each precompiling into its own new cache directory; `store.url` empty: none.
FleetRun run_fleet(const char* self, unsigned n, const Store& store) {
  std::vector<std::string> dirs;
  std::vector<pid_t> pids;
  std::vector<int> outs;
  FleetRun run;
  reap_orphans();
  const double cpu_before = children_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> waiters;
  std::vector<std::vector<std::vector<double>>> results(n);
  for (unsigned p = 0; p < n; ++p) {
    dirs.push_back(make_temp_dir("fleet"));
    std::vector<std::string> env = {"KILN_CACHE_DIR=" + dirs.back()};
    if (!store.url.empty()) {
      env.push_back("KILN_REMOTE_CACHE=" + store.url);
      env.push_back("KILN_REMOTE_KEY=" + kKey);
      if (!store.auth_file.empty()) env.push_back("KILN_REMOTE_AUTH_FILE=" + store.auth_file);
    }
    waiters.emplace_back([&, p, env] {
      try {
        results[p] = run_children(self, {"--child", "precompile"}, 1, 4, env, {}, true);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "remote_fleet: a process failed: %s\n", e.what());
      }
    });
  }
  for (auto& t : waiters) t.join();
  run.wall_s = ms_since(start) / 1000.0;
  reap_orphans();
  run.cpu_s = children_cpu_seconds() - cpu_before;
  for (const auto& r : results) {
    if (r.empty()) {
      run.ok = false;
      continue;
    }
    run.process_s.push_back(r[0][0] / 1000.0);
    run.compiled += static_cast<int>(r[1][0]);
    run.cached += static_cast<int>(r[2][0]);
  }
  for (const auto& d : dirs) remove_tree(d);
  return run;
}

// The servers behind --stores, each started once on 127.0.0.1; url(store, run) is a new, empty place in
// it for each run (Redis: flushed), so no run finds another's entries or leases.
class Servers {
 public:
  explicit Servers(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      if (name == "redis") redis_ = std::make_unique<kiln::test::RedisServer>();
      if (name == "https") https_ = std::make_unique<kiln::test::NginxServer>(true);
      if (name == "http") http_ = std::make_unique<kiln::test::NginxServer>(false);
      if (name == "s3") {
        s3_ = std::make_unique<kiln::test::ObjectServer>("s3");
        credentials_ = kiln::test::write_secret(secrets_.path() / "credentials",
                                                std::string("aws_access_key_id = ") + kiln::test::ObjectServer::kAccessKey +
                                                    "\naws_secret_access_key = " + kiln::test::ObjectServer::kSecretKey + "\n")
                           .string();
      }
    }
  }
  kiln::test::RedisServer* redis() { return redis_.get(); }

  // Bounds a loaded machine's servers keep: on 2 cores under other builds a Python server can take more than
  // the stores' 1 s to accept a connection, and a failure would open a process's breaker mid-run.
  static constexpr const char* kPatient = "connect_timeout_ms=5000&timeout_ms=30000";

  Store store(const std::string& name, unsigned run) {
    const std::string place = "fleet-" + std::to_string(run);
    if (name == "redis") {
      kiln::test::RedisClient(redis_->port()).command({"FLUSHALL"});
      return {"Redis", redis_->url(kPatient), ""};
    }
    if (name == "https") return {"nginx WebDAV over TLS", https_->url("open/" + place, kPatient), ""};
    if (name == "http") return {"nginx WebDAV", http_->url("open/" + place, kPatient), ""};
    if (name == "s3") return {"S3 (object_server.py)", s3_->s3_url("kiln-cache/" + place, kPatient), credentials_};
    return {"none", "", ""};
  }

 private:
  std::unique_ptr<kiln::test::RedisServer> redis_;
  std::unique_ptr<kiln::test::NginxServer> https_, http_;
  std::unique_ptr<kiln::test::ObjectServer> s3_;
  kiln::test::ScratchDir secrets_;
  std::string credentials_;
};

// Which --stores a name may be, and whether this machine has its server's program ("" when it does).
std::string missing_program(const std::string& name) {
  if (name == "none") return "";
  if (name == "redis") return kiln::test::redis_server_path().empty() ? "redis-server" : "";
  if (name == "https" || name == "http")
    return kiln::test::nginx_path().empty() || kiln::test::openssl_path().empty() ? "nginx or openssl" : "";
  if (name == "s3") return kiln::test::python_path().empty() ? "python3" : "";
  return "?";
}

int usage(const char* self) {
  std::fprintf(stderr, "usage: %s [--stores none,redis,http,https,s3] [--no-hits] [PROCESSES...]   (default: "
               "--stores none,redis, 1 4 16)\n", self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--child") == 0) {
    const std::string what = argv[3];
    if (what == "precompile") return child_precompile();
    if (what == "hit" && argc == 6) return child_hit(argv[4], argv[5]);
    if (what == "cold" && argc == 6) return child_cold(argv[4], argv[5]);
    if (what == "fetch" && argc == 6) return child_fetch(argv[4], argv[5]);
    return 2;
  }
  std::vector<unsigned> counts;
  std::vector<std::string> stores = {"none", "redis"};
  bool hits = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-hits") {
      hits = false;
    } else if (arg == "--stores" && i + 1 < argc) {
      stores.clear();
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) {
        if (missing_program(name) == "?") return usage(argv[0]);
        stores.push_back(name);
      }
    } else {
      counts.push_back(static_cast<unsigned>(std::atoi(arg.c_str())));
      if (counts.back() == 0) return usage(argv[0]);
    }
  }
  if (counts.empty()) counts = {1, 4, 16};
  if (hits && std::find(stores.begin(), stores.end(), "redis") == stores.end()) stores.push_back("redis");
  for (const std::string& name : stores)
    if (const std::string missing = missing_program(name); !missing.empty()) {
      std::fprintf(stderr, "bench_remote_fleet: %s is not installed (scripts/setup.sh installs it)\n", missing.c_str());
      return 1;
    }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // JIT workers outlive their process: their CPU time must count
  Servers servers(stores);
  const unsigned units = static_cast<unsigned>(kiln::bench_cub::catalog().units.size() + kiln::examples::catalog().units.size());
  std::printf("kiln remote tier, a fleet on one machine: %u units (%zu CUB-heavy + %zu examples) cold for sm_90, %u cores; "
              "each process a new cache directory, all started at once; the store on 127.0.0.1\n\n",
              units, kiln::bench_cub::catalog().units.size(), kiln::examples::catalog().units.size(),
              std::thread::hardware_concurrency());
  std::printf("| processes | remote | wall | each process (fastest-slowest) | CPU (all processes and workers) | compiled | "
              "compiles per unit | from the remote |\n|---:|---|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  unsigned run_number = 0;
  for (const unsigned n : counts) {
    for (const std::string& name : stores) {
      const Store store = servers.store(name, ++run_number);
      const FleetRun run = run_fleet(argv[0], n, store);
      const auto [fastest, slowest] = std::minmax_element(run.process_s.begin(), run.process_s.end());
      std::printf("| %u | %s | %.1f s | %.1f-%.1f s | %.1f s | %d | %.2f | %d |%s\n", n, store.name.c_str(), run.wall_s,
                  run.process_s.empty() ? 0.0 : *fastest, run.process_s.empty() ? 0.0 : *slowest, run.cpu_s, run.compiled,
                  static_cast<double>(run.compiled) / units, run.cached, run.ok ? "" : " (a process failed)");
      std::fflush(stdout);
    }
  }
  if (!hits) {
    reap_orphans();
    return 0;
  }
  kiln::test::RedisServer& server = *servers.redis();
  kiln::test::RedisClient redis(server.port());

  // One entry from the remote in a new process, against a cold compile of the same unit.
  std::printf("\n| unit | entry on disk | remote hit: the tier's step, new process (median of 9) | of which the remote "
              "(connect, GET, tag, decode) | cold compile, new process (median of 3) |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [registry, kernel] : {std::pair<std::string, std::string>{"examples", "block_sum_f32"},
                                         {"bench_cub", "sort_scan_i32_256x8"}}) {
    redis.command({"FLUSHALL"});
    const std::string seed = make_temp_dir("seed");
    // Published by one process (compiled cold: that is the third column's run too).
    std::vector<double> cold;
    for (int r = 0; r < 3; ++r) {
      const std::string dir = make_temp_dir("cold");
      std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir};
      if (r == 0) env = {"KILN_CACHE_DIR=" + seed, "KILN_REMOTE_CACHE=" + server.url(), "KILN_REMOTE_KEY=" + kKey};
      cold.push_back(run_children(argv[0], {"--child", "cold", registry, kernel}, 1, 1, env, {}, true)[0][0]);
      remove_tree(dir);
    }
    std::vector<double> hits, fetches;
    double bytes = 0;
    for (int r = 0; r < 9; ++r) {
      const std::string dir = make_temp_dir("hit");
      const std::vector<std::string> env = {"KILN_CACHE_DIR=" + dir, "KILN_REMOTE_CACHE=" + server.url(),
                                            "KILN_REMOTE_KEY=" + kKey};
      const auto out = run_children(argv[0], {"--child", "hit", registry, kernel}, 1, 3, env, {}, true);
      hits.push_back(out[0][0]);
      bytes = out[1][0];
      fetches.push_back(run_children(argv[0], {"--child", "fetch", registry, kernel}, 1, 1, env, {}, true)[0][0]);
      remove_tree(dir);
    }
    remove_tree(seed);
    std::printf("| %s/%s | %.1f KiB | %.2f ms (%.2f-%.2f) | %.2f ms | %.0f ms |\n", registry.c_str(), kernel.c_str(),
                bytes / 1024.0, median(hits), *std::min_element(hits.begin(), hits.end()),
                *std::max_element(hits.begin(), hits.end()), median(fetches), median(cold));
    std::fflush(stdout);
  }
  reap_orphans();
  return 0;
}
