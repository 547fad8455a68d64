// The remote tier on a real GPU: a kernel one "machine" (a registry with its own cache directory)
// compiles is published to a real redis-server; the next machine, with an empty cache directory, gets it
// from the remote tier (provenance: remote), launches it and checks the result, and has it on its disk
// afterwards; a third finds the entry altered in Redis, refuses it and compiles the kernel itself.
#include <doctest/doctest.h>

#include <kiln/kiln.hpp>

#include "example_checks.hpp"
#include "examples_catalog.hpp"
#include "remote_test_util.hpp"

namespace {

// The examples from the JIT tier only: nothing embedded, no PTX.
const kiln::RegistryOptions kJitOnly{.allow_ptx = false, .use_embedded = false};

}  // namespace

TEST_CASE("remote tier: a kernel compiled on one machine is served to the next from Redis, launched and checked") {
  if (kiln::test::redis_server_path().empty()) {
    MESSAGE("skipped: redis-server is not installed (scripts/setup.sh installs it; or set KILN_TEST_REDIS_SERVER)");
    return;
  }
  kiln::test::RedisServer server;
  kiln::test::FleetMachine first(kiln::examples::catalog(), server.url(), kJitOnly);
  const kiln::Kernel compiled = first.registry.get("block_sum_f32");
  CHECK(compiled.provenance.source == kiln::Tier::jit);
  CHECK(first.remote.stats().stores == 1);
  MESSAGE("block_sum_f32 compiled by the JIT tier and published: " << compiled.provenance.load_ms << " ms");

  kiln::test::FleetMachine second(kiln::examples::catalog(), server.url(), kJitOnly);
  CHECK(second.registry.plan("block_sum_f32").source == kiln::Tier::remote);
  const kiln::Kernel fetched = second.registry.get("block_sum_f32");
  CHECK(fetched.provenance.tier == kiln::Tier::remote);
  CHECK(fetched.provenance.source == kiln::Tier::remote);
  CHECK(fetched.provenance.arch == second.registry.device().arch);
  CHECK(fetched.provenance.cache_key == second.registry.cache_key("block_sum_f32").hex);
  MESSAGE("block_sum_f32 from the remote tier: " << fetched.provenance.load_ms << " ms (get, load included)");
  CHECK(kiln::test::block_sum_works(second.registry));
  CHECK(second.registry.stats().remote_loads == 1);
  CHECK(second.registry.stats().jit_compiles == 0);
  CHECK(second.remote.stats().hits == 1);
  CHECK(second.disk.contains(second.registry.cache_key("block_sum_f32")));  // the next process here needs no network

  kiln::test::RedisClient redis(server.port());
  const std::string name = kiln::test::entry_name(second.registry.cache_key("block_sum_f32").hex);
  std::string value = redis.command({"GET", name});
  value[value.size() - 9] = static_cast<char>(value[value.size() - 9] ^ 0x04);
  redis.command({"SET", name, value});
  kiln::test::FleetMachine third(kiln::examples::catalog(), server.url(), kJitOnly);
  const kiln::Kernel rebuilt = third.registry.get("block_sum_f32");
  CHECK(rebuilt.provenance.source == kiln::Tier::jit);
  CHECK(third.remote.stats().rejected >= 1);
  CHECK(kiln::test::block_sum_works(third.registry));
}
