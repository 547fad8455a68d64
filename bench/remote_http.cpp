// The remote tier's HTTP(S) and S3 stores, two cache directories as two machines and the servers on
// 127.0.0.1: machine A compiles the examples for sm_90 (NVRTC, no GPU) and pushes them to each store;
// machine B, with an empty cache directory, gets each unit through the tier chain (GET, tag, decode,
// written to its disk): the first with a new remote cache (connect, and TLS, included), the rest on its
// kept connection. Then the cost of a get when the server is down: the first (refused, or a timeout for
// a mute server), and each one after the breaker opened. Redis beside them where redis-server is
// installed. Prints Markdown tables.
//
//   bench_remote_http [ROUNDS]    (default 5: each unit fetched ROUNDS times into new directories)
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>
#include <kiln/remote.hpp>

#include "examples_catalog.hpp"
#include "registry/query.hpp"  // make_chain

#include "bench_util.hpp"
#include "http_servers.hpp"  // tests/cpu: nginx, object_server.py, redis-server on free 127.0.0.1 ports

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::remove_tree;

constexpr unsigned kArch = 90;
const std::string kKey = "bench-fleet-key-0123456789abcdef";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::unique_ptr<kiln::RemoteCache> remote(const std::string& url, const std::string& auth_file = "") {
  kiln::RemoteConfig config;
  config.url = url;
  config.fleet_key = kKey;
  config.auth_file = auth_file;
  return std::make_unique<kiln::RemoteCache>(config);
}

// One kernel of each unit of the examples.
std::vector<const kiln::KernelEntry*> one_kernel_per_unit(const kiln::Catalog& catalog) {
  std::vector<const kiln::KernelEntry*> kernels;
  std::set<std::uint32_t> seen;
  for (const kiln::KernelEntry& k : catalog.kernels)
    if (seen.insert(k.unit).second) kernels.push_back(&k);
  return kernels;
}

struct Store {
  std::string name, url, auth_file;
};

struct Hits {
  std::vector<double> first_ms, kept_ms;
  double bytes = 0;
  int missed = 0;
};

// Machine B: every unit through the chain into a new cache directory, `rounds` times.
Hits fetch_all(const Store& store, int rounds) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  Hits hits;
  std::vector<double> sizes;
  for (int round = 0; round < rounds; ++round) {
    const std::string dir = make_temp_dir("http-b");
    {
      kiln::CacheConfig config;
      config.dir = dir;
      kiln::DiskCache disk(config);
      auto r = remote(store.url, store.auth_file);
      const kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = false,
                                          .remote = r.get()};
      const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog, options);
      bool first = true;
      for (const kiln::KernelEntry* k : one_kernel_per_unit(catalog)) {
        const kiln::detail::UnitQuery query = chain.query(*k, kArch);
        const auto start = std::chrono::steady_clock::now();
        kiln::detail::UnitImage image;
        try {
          image = chain.fetch(query);
        } catch (const std::exception&) {
          ++hits.missed;
          continue;
        }
        const double ms = ms_since(start);
        if (image.tier != kiln::Tier::remote) {
          ++hits.missed;
          continue;
        }
        (first ? hits.first_ms : hits.kept_ms).push_back(ms);
        first = false;
      }
      sizes.push_back(static_cast<double>(r->stats().bytes_read) / std::max<std::uint64_t>(1, r->stats().hits));
    }
    remove_tree(dir);
  }
  hits.bytes = median(sizes);
  return hits;
}

struct Down {
  double first_ms = 0, each_us = 0, remote_us = 0;
  std::uint64_t errors = 0, skipped = 0;
};

// Gets from a store that is down: the first, then 1000 more with the breaker open.
Down gets_when_down(const std::string& url) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const std::string dir = make_temp_dir("http-down");
  Down down;
  {
    kiln::CacheConfig config;
    config.dir = dir;
    kiln::DiskCache disk(config);
    auto r = remote(url);
    const kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = false,
                                        .remote = r.get()};
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog, options);
    const kiln::detail::UnitQuery query = chain.query(*one_kernel_per_unit(catalog).front(), kArch);
    const auto get = [&] {
      try {
        (void)chain.fetch(query);
      } catch (const std::exception&) {
      }
    };
    auto start = std::chrono::steady_clock::now();
    get();
    down.first_ms = ms_since(start);
    constexpr int kGets = 1000;
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < kGets; ++i) get();
    down.each_us = ms_since(start) * 1000.0 / kGets;
    // The remote tier's own part: RemoteCache::load, the breaker's check alone.
    const kiln::CacheKey key = query.key();
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < kGets; ++i) (void)r->load(key);
    down.remote_us = ms_since(start) * 1000.0 / kGets;
    down.errors = r->stats().errors;
    down.skipped = r->stats().skipped;
  }
  remove_tree(dir);
  return down;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::string dir_a = make_temp_dir("http-a");
  ::setenv("KILN_CACHE_DIR", dir_a.c_str(), 1);
  ::unsetenv("KILN_REMOTE_CACHE");
  const kiln::Catalog& catalog = kiln::examples::catalog();
  auto start = std::chrono::steady_clock::now();
  const auto compiled = kiln::precompile(catalog, kArch);
  std::fprintf(stderr, "machine A: %zu units compiled for sm_90 in %.1f s\n", compiled.size(), ms_since(start) / 1000);

  kiln::test::NginxServer tls(true), plain(false);
  kiln::test::ObjectServer s3("s3");
  kiln::test::ScratchDir secrets;
  const std::string credentials = kiln::test::write_secret(
      secrets.path() / "credentials", std::string("aws_access_key_id = ") + kiln::test::ObjectServer::kAccessKey +
                                          "\naws_secret_access_key = " + kiln::test::ObjectServer::kSecretKey + "\n");
  std::vector<Store> stores = {{"https, nginx (TLS)", tls.url("open/bench"), ""},
                               {"http, nginx", plain.url("open/bench"), ""},
                               {"s3, object_server.py (Python)", s3.s3_url("kiln-cache/bench"), credentials}};
  std::unique_ptr<kiln::test::RedisServer> redis;
  if (!kiln::test::redis_server_path().empty()) {
    redis = std::make_unique<kiln::test::RedisServer>();
    stores.insert(stores.begin(), {"redis", redis->url(), ""});
  }
  for (const Store& s : stores) {
    auto r = remote(s.url, s.auth_file);
    const kiln::PushReport pushed = kiln::push(kiln::default_cache(), *r);
    std::fprintf(stderr, "machine A: pushed %llu entries to %s\n", static_cast<unsigned long long>(pushed.pushed), s.name.c_str());
  }

  std::printf("| store | units | entry (median) | first hit, new connection (median of %d) | hit on a kept connection (median) | misses |\n",
              rounds);
  std::printf("|---|---|---|---|---|---|\n");
  for (const Store& s : stores) {
    const Hits h = fetch_all(s, rounds);
    std::printf("| %s | %zu | %.0f KiB | %.2f ms | %.2f ms | %d |\n", s.name.c_str(), one_kernel_per_unit(catalog).size(),
                h.bytes / 1024, median(h.first_ms), median(h.kept_ms), h.missed);
  }

  kiln::test::ObjectServer silent("silent");
  const std::string dead = "http://127.0.0.1:" + std::to_string(kiln::test::free_port()) + "/bench?retry_ms=600000";
  std::printf("\n| server down | first get | each get after, breaker open (1000) | of which the remote tier | errors | "
              "skipped |\n|---|---|---|---|---|---|\n");
  for (const auto& [name, url] : std::vector<std::pair<std::string, std::string>>{
           {"nothing listening (refused)", dead},
           {"accepts, never answers (timeout_ms=500)", silent.http_url("bench", "timeout_ms=500&retry_ms=600000")}}) {
    const Down d = gets_when_down(url);
    std::printf("| %s | %.2f ms | %.2f us | %.3f us | %llu | %llu |\n", name.c_str(), d.first_ms, d.each_us, d.remote_us,
                static_cast<unsigned long long>(d.errors), static_cast<unsigned long long>(d.skipped));
  }
  remove_tree(dir_a);
  return 0;
}
