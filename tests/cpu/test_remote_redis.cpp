// The remote tier against a real redis-server: entries in and out (tagged, with a TTL, capped), read-only
// mode, the store's leases, the tier's step in the chain, and the fleet-wide single-flight in one process.
#include <doctest/doctest.h>

#include "chain/entry.hpp"
#include "registry/query.hpp"  // unit_cache_key with a DiskCache
#include "remote/config.hpp"
#include "remote/redis_store.hpp"
#include "remote/remote_tier.hpp"
#include "remote/sealed_entry.hpp"
#include "one_unit.hpp"
#include "remote_test_util.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/remote.hpp>

#include <atomic>
#include <thread>

using kiln::test::RedisClient;
using kiln::test::remote_at;
using kiln::test::sample_entry;
using kiln::test::sample_key;

TEST_SUITE_BEGIN("remote");

TEST_CASE("an entry goes to Redis tagged, compressed, with its TTL, under kiln:<key id>:entry:<key>, and comes back verified") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const kiln::CacheKey key = sample_key(1);
  const kiln::CacheEntry entry = sample_entry(1);
  auto writer = remote_at(server.url("ttl_s=3600"));
  REQUIRE(writer->usable());
  CHECK_FALSE(writer->load(key));
  CHECK(writer->stats().misses == 1);
  REQUIRE(writer->store(key, entry));

  const std::string value = redis.command({"GET", kiln::test::entry_name(key.hex)});
  const std::string file = kiln::detail::encode_entry(key, entry);
  CHECK(value.size() == file.size() + kiln::detail::kSealOverhead);
  CHECK(value.starts_with(kiln::detail::kSealMagic));
  CHECK(value.ends_with(file));  // the entry file as the disk stores it: compressed once, never again
  const long ttl = std::stol(redis.command({"PTTL", kiln::test::entry_name(key.hex)}));
  CHECK(ttl > 3'590'000);
  CHECK(ttl <= 3'600'000);
  CHECK(writer->stats().stores == 1);
  CHECK(writer->stats().bytes_written == value.size());

  auto reader = remote_at(server.url());
  const auto loaded = reader->load(key);
  REQUIRE(loaded);
  CHECK(kiln::test::same_entry(*loaded, entry));
  CHECK(reader->stats().hits == 1);
  CHECK(reader->stats().bytes_read == value.size());
  CHECK(reader->warnings().empty());
  CHECK(writer->warnings().empty());
}

TEST_CASE("read-only: never writes an entry or a lease, but waits on a lease another machine holds") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const kiln::CacheKey key = sample_key(2);
  auto ro = remote_at(server.url("mode=ro"));
  REQUIRE(ro->usable());
  CHECK(ro->where().find("read-only") != std::string::npos);
  CHECK_FALSE(ro->store(key, sample_entry(2)));
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return sample_entry(2);
  };
  auto built = kiln::detail::build_once_in_fleet(ro.get(), key, build);
  CHECK(builds == 1);
  CHECK_FALSE(built.from_remote);
  CHECK(redis.command({"DBSIZE"}) == "0");

  // Another machine holds the lease and publishes after 300 ms: the read-only process takes its entry.
  redis.command({"SET", kiln::test::lease_name(key.hex), "another-machine", "PX", "5000"});
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    remote_at(server.url())->store(key, sample_entry(2));
  });
  built = kiln::detail::build_once_in_fleet(ro.get(), key, build);
  other.join();
  CHECK(builds == 1);
  CHECK(built.from_remote);
  CHECK(kiln::test::same_entry(built.entry, sample_entry(2)));
  CHECK(ro->stats().lease_waits == 1);
  CHECK(ro->stats().lease_wait_ms >= 250);
}

TEST_CASE("an entry larger than the size cap is not published: counted, one warning") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  auto remote = remote_at(server.url("max_bytes=2000"));
  CHECK_FALSE(remote->store(sample_key(3), sample_entry(3, 90, 8192)));
  CHECK_FALSE(remote->store(sample_key(4), sample_entry(4, 90, 8192)));
  CHECK(remote->store(sample_key(5), sample_entry(5, 90, 64)));
  CHECK(remote->stats().too_large == 2);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("max_bytes") != std::string::npos);
  CHECK(RedisClient(server.port()).command({"DBSIZE"}) == "1");
}

TEST_CASE("the Redis store's leases: taken once, released and renewed only by their holder, freed by expiry") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  kiln::RemoteSettings settings;
  kiln::RemoteSettings ignored;
  auto store = kiln::detail::make_redis_store(*kiln::detail::parse_redis_url(server.url(), ignored), settings);
  using ms = std::chrono::milliseconds;
  CHECK(store->try_lease("L", "me", ms(5000)).kind == kiln::RemoteReply::done);
  CHECK(store->try_lease("L", "you", ms(5000)).kind == kiln::RemoteReply::held);
  store->release_lease("L", "you");  // not the holder: nothing happens
  CHECK(redis.command({"GET", "L"}) == "me");
  CHECK_FALSE(store->renew_lease("L", "you", ms(60000)));
  CHECK(store->renew_lease("L", "me", ms(60000)));
  CHECK(std::stol(redis.command({"PTTL", "L"})) > 50000);
  store->release_lease("L", "me");
  CHECK(redis.command({"EXISTS", "L"}) == "0");
  CHECK(store->try_lease("L", "you", ms(100)).kind == kiln::RemoteReply::done);
  std::this_thread::sleep_for(ms(250));
  CHECK(store->try_lease("L", "me", ms(60000)).kind == kiln::RemoteReply::done);  // its holder "died": expired
  CHECK(store->contains("L"));
  CHECK_FALSE(store->contains("M"));
  CHECK_FALSE(store->get("M"));
}

using kiln::test::OneUnit;

TEST_CASE("the chain: a remote hit is verified, written to the disk cache, and served as Tier::remote") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  OneUnit one;
  auto remote = remote_at(server.url());
  REQUIRE(remote->store(one.key(), sample_entry(1)));
  kiln::test::TempDir tmp;
  kiln::DiskCache disk(kiln::test::config_at(tmp.path()));
  kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = false, .remote = remote.get()};
  const kiln::detail::TierChain chain = kiln::detail::make_chain(one.catalog, options);
  const kiln::detail::UnitQuery query = chain.query(one.catalog.kernels[0], 90);

  const auto plan = chain.probe(query);
  REQUIRE(plan);
  CHECK(plan->source == kiln::Tier::remote);
  const kiln::detail::UnitImage image = chain.fetch(query);
  CHECK(image.tier == kiln::Tier::remote);
  CHECK(image.source == kiln::Tier::remote);
  CHECK(image.owned == sample_entry(1).cubin);
  CHECK(image.label.find("from the remote cache " + remote->where()) != std::string::npos);
  CHECK(image.cache_key == one.key().hex);
  REQUIRE(disk.contains(one.key()));  // written to this machine's disk, byte for byte as published
  CHECK(disk.load(one.key()));
  CHECK(chain.fetch(query).tier == kiln::Tier::disk);
  CHECK(remote->stats().hits == 1);

  SUBCASE("another architecture is not there: every tier's reason in the error") {
    const kiln::detail::UnitQuery other = chain.query(one.catalog.kernels[0], 80);
    try {
      (void)chain.fetch(other);
      FAIL("no tier should have it");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::no_binary);
      CHECK(std::string(e.what()).find("the remote cache " + remote->where() + " has no entry") != std::string::npos);
    }
  }
  SUBCASE("with use_remote off, it is not asked") {
    options.use_remote = false;
    const kiln::detail::TierChain off_chain = kiln::detail::make_chain(one.catalog, options);
    const kiln::detail::UnitQuery off = off_chain.query(one.catalog.kernels[0], 90);
    disk.clear();
    CHECK_THROWS_AS((void)off_chain.fetch(off), kiln::Error);
  }
}

TEST_CASE("single-flight in one process: the first builds under the lease and publishes, the next fetches") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  auto remote = remote_at(server.url());
  const kiln::CacheKey key = sample_key(6);
  int builds = 0;
  const auto build = [&] {
    ++builds;
    CHECK(redis.command({"EXISTS", kiln::test::lease_name(key.hex)}) == "1");  // built under the lease
    return sample_entry(6);
  };
  auto first = kiln::detail::build_once_in_fleet(remote.get(), key, build);
  CHECK(builds == 1);
  CHECK_FALSE(first.from_remote);
  CHECK(redis.command({"EXISTS", kiln::test::lease_name(key.hex)}) == "0");  // released
  CHECK(redis.command({"EXISTS", kiln::test::entry_name(key.hex)}) == "1");  // published
  auto second = kiln::detail::build_once_in_fleet(remote.get(), key, build);
  CHECK(builds == 1);
  CHECK(second.from_remote);
  CHECK(remote->stats().leases == 2);

  SUBCASE("a build that throws releases the lease at once, and nothing is published") {
    const kiln::CacheKey cold = sample_key(7);
    CHECK_THROWS_WITH_AS(kiln::detail::build_once_in_fleet(remote.get(), cold,
                                                           []() -> kiln::CacheEntry { throw kiln::Error(kiln::Errc::compile, "bad unit"); }),
                         "bad unit", kiln::Error);
    CHECK(redis.command({"EXISTS", kiln::test::lease_name(cold.hex)}) == "0");
    CHECK(redis.command({"EXISTS", kiln::test::entry_name(cold.hex)}) == "0");
  }
}

TEST_CASE("a lease whose holder died expires; a waiter then builds; one that waits too long builds anyway") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return sample_entry(8);
  };
  SUBCASE("expiry") {
    const kiln::CacheKey key = sample_key(8);
    auto remote = remote_at(server.url());
    redis.command({"SET", kiln::test::lease_name(key.hex), "a-dead-holder", "PX", "400"});
    const double ms = kiln::test::ms_of([&] { CHECK_FALSE(kiln::detail::build_once_in_fleet(remote.get(), key, build).from_remote); });
    CHECK(builds == 1);
    CHECK(ms >= 350);
    CHECK(ms < 10000);  // the lease's expiry, not wait_ms (120 s)
    CHECK(remote->stats().lease_waits == 1);
    CHECK(remote->stats().lease_timeouts == 0);
  }
  SUBCASE("the wait's bound") {
    const kiln::CacheKey key = sample_key(9);
    auto remote = remote_at(server.url("wait_ms=300&lease_ms=60000"));
    redis.command({"SET", kiln::test::lease_name(key.hex), "a-stuck-holder", "PX", "60000"});
    const double ms = kiln::test::ms_of([&] { kiln::detail::build_once_in_fleet(remote.get(), key, build); });
    CHECK(builds == 1);
    CHECK(ms >= 290);
    CHECK(ms < 10000);  // wait_ms, not the lease (60 s)
    CHECK(remote->stats().lease_timeouts == 1);
    CHECK(kiln::test::has_warning(*remote, "wait_ms"));
    CHECK(redis.command({"EXISTS", kiln::test::entry_name(key.hex)}) == "1");  // published all the same
  }
}

TEST_CASE("a lease planted without an expiry, or with one longer than lease_ms, is taken over: no wait") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return sample_entry(14);
  };
  const kiln::CacheKey key = sample_key(14);
  const std::string lease = kiln::test::lease_name(key.hex);
  // wait_ms bounds what a waiter would otherwise lose here (120 s by default).
  auto remote = remote_at(server.url("wait_ms=8000"));
  SUBCASE("no expiry") { redis.command({"SET", lease, "planted"}); }
  SUBCASE("an hour") { redis.command({"SET", lease, "planted", "PX", "3600000"}); }
  SUBCASE("another type, no expiry") { redis.command({"LPUSH", lease, "planted"}); }
  const double ms = kiln::test::ms_of([&] { CHECK_FALSE(kiln::detail::build_once_in_fleet(remote.get(), key, build).from_remote); });
  CHECK(builds == 1);
  CHECK(ms < 4000);
  CHECK(remote->stats().lease_timeouts == 0);
  CHECK(remote->stats().leases == 1);
  CHECK(redis.command({"EXISTS", lease}) == "0");  // released by its new holder
  CHECK(redis.command({"EXISTS", kiln::test::entry_name(key.hex)}) == "1");
  // A read-only machine does not wait on such a lease either.
  redis.command({"SET", lease, "planted"});
  auto ro = remote_at(server.url("mode=ro&wait_ms=8000"));
  const kiln::CacheKey cold = sample_key(15);
  redis.command({"SET", kiln::test::lease_name(cold.hex), "planted"});
  const double ro_ms = kiln::test::ms_of([&] { kiln::detail::build_once_in_fleet(ro.get(), cold, build); });
  CHECK(builds == 2);
  CHECK(ro_ms < 4000);
  CHECK(ro->stats().lease_timeouts == 0);
}

TEST_CASE("the holder renews its lease while it builds, so a short lease outlives a long build") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  // Renewed every 400 ms: a renewal may come up to 800 ms late (a loaded CI machine) before it lapses.
  auto remote = remote_at(server.url("lease_ms=1200"));
  const kiln::CacheKey key = sample_key(10);
  std::vector<std::string> seen;
  kiln::detail::build_once_in_fleet(remote.get(), key, [&] {
    RedisClient look(server.port());
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      seen.push_back(look.command({"EXISTS", kiln::test::lease_name(key.hex)}));
    }
    return sample_entry(10);
  });
  CHECK(seen == std::vector<std::string>{"1", "1", "1", "1"});  // 2.4 s into a 1.2 s lease
  CHECK(redis.command({"EXISTS", kiln::test::lease_name(key.hex)}) == "0");
}

TEST_SUITE_END();

// The concurrency suite: also run under ThreadSanitizer (scripts/sanitize.sh).
TEST_SUITE_BEGIN("concurrency");

TEST_CASE("8 threads, each a machine with its own cache directory, share one remote cache: each key is built once") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  auto remote = remote_at(server.url());
  constexpr int kThreads = 8;
  constexpr int kKeys = 6;
  std::atomic<int> builds[kKeys] = {};
  std::vector<std::unique_ptr<kiln::test::TempDir>> dirs;
  for (int t = 0; t < kThreads; ++t) dirs.push_back(std::make_unique<kiln::test::TempDir>());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      kiln::DiskCache disk(kiln::test::config_at(dirs[t]->path()));
      for (int k = 0; k < kKeys; ++k) {
        const kiln::CacheKey key = sample_key(100 + k);
        const kiln::CacheEntry entry = disk.get_or_build(key, [&] {
          return kiln::detail::build_once_in_fleet(remote.get(), key, [&] {
            builds[k].fetch_add(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            return sample_entry(100 + k);
          }).entry;
        });
        if (!kiln::test::same_entry(entry, sample_entry(100 + k)) || !disk.load(key)) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  for (int k = 0; k < kKeys; ++k) {
    CAPTURE(k);
    CHECK(builds[k].load() == 1);
  }
  CHECK(remote->warnings().empty());
  CHECK(remote->stats().errors == 0);
}

TEST_SUITE_END();
