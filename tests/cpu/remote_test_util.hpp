// What the remote tier's doctest files share: remote caches on a test server, the skip, timing.
#pragma once

#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>
#include <kiln/remote.hpp>

#include "cache_test_util.hpp"
#include "redis_server.hpp"

#include <chrono>
#include <memory>
#include <string>

// Skips the test case (a message, as the suite's other skips) when redis-server is not installed;
// scripts/setup.sh installs it, so CI runs them.
#define KILN_SKIP_WITHOUT_REDIS()                                                          \
  do {                                                                                     \
    if (kiln::test::redis_server_path().empty()) {                                         \
      MESSAGE("skipped: redis-server is not installed (scripts/setup.sh installs it)");    \
      return;                                                                              \
    }                                                                                      \
  } while (false)

namespace kiln::test {

inline RemoteConfig remote_config(const std::string& url, const std::string& key = kFleetKey) {
  RemoteConfig config;
  config.url = url;
  config.fleet_key = key;
  return config;
}

inline std::unique_ptr<RemoteCache> remote_at(const std::string& url, const std::string& key = kFleetKey) {
  return std::make_unique<RemoteCache>(remote_config(url, key));
}

// One machine of a fleet: a registry of `catalog` with a disk cache of its own and the fleet's remote cache
// at `url`; `options` say the rest (their cache and remote are these).
struct FleetMachine {
  TempDir dir;
  DiskCache disk;
  RemoteCache remote;
  Registry registry;
  FleetMachine(const Catalog& catalog, const std::string& url, RegistryOptions options = {})
      : disk(config_at(dir.path())), remote(remote_config(url)), registry(catalog, 0, mine(options)) {}

 private:
  RegistryOptions mine(RegistryOptions options) {
    options.cache = &disk;
    options.remote = &remote;
    return options;
  }
};

// The shared server, emptied: every test case starts from nothing.
inline RedisServer& fresh_shared_redis() {
  RedisServer& server = *shared_redis();
  RedisClient(server.port()).command({"FLUSHALL"});
  return server;
}

template <typename F>
double ms_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

inline bool has_warning(const RemoteCache& remote, std::string_view part) {
  for (const std::string& w : remote.warnings())
    if (w.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace kiln::test
