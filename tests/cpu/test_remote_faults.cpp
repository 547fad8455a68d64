// The remote tier when things go wrong: a server killed mid-run, one that never answers, one that answers
// garbage, entries altered or untagged in the store, another fleet's key, a server at its memory limit.
// Each costs at most one warning of its kind and a bounded wait; kiln goes on, correct, without it.
#include <kiln/cache.hpp>
#include <kiln/remote.hpp>
#include <doctest/doctest.h>

#include "chain/entry.hpp"
#include "remote/remote_tier.hpp"
#include "remote_test_util.hpp"

using kiln::test::FakeServer;
using kiln::test::ms_of;
using kiln::test::RedisClient;
using kiln::test::remote_at;
using kiln::test::sample_entry;
using kiln::test::sample_key;

TEST_SUITE_BEGIN("remote");

namespace {

// A build that counts, for the single-flight: returns sample_entry(n).
struct CountingBuild {
  int n;
  int builds = 0;
  kiln::CacheEntry operator()() {
    ++builds;
    return sample_entry(n);
  }
};

kiln::detail::FleetBuild build_once(kiln::RemoteCache& remote, int n, CountingBuild& build) {
  return kiln::detail::build_once_in_fleet(&remote, sample_key(n), std::ref(build));
}

}  // namespace

TEST_CASE("a server killed mid-run: one warning, then no remote until retry_ms; every call bounded, results right") {
  KILN_SKIP_WITHOUT_REDIS();
  kiln::test::RedisServer server;
  // Bounds with room for a loaded CI machine (two test binaries and compilers on 2 cores): retry_ms
  // must outlast the steps made while the breaker is open, and a "no wait" bound stays far below a timeout.
  auto remote = remote_at(server.url("timeout_ms=1000&connect_timeout_ms=1000&retry_ms=3000"));
  REQUIRE(remote->store(sample_key(1), sample_entry(1)));
  REQUIRE(remote->load(sample_key(1)));
  server.kill();

  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(1))); }) < 900);  // a reset connection: at once
  CHECK(remote->stats().errors == 1);
  // The breaker is open: no call is made, nothing is waited for.
  CountingBuild build{2};
  CHECK(ms_of([&] { CHECK_FALSE(build_once(*remote, 2, build).from_remote); }) < 500);
  CHECK(build.builds == 1);
  CHECK(remote->stats().skipped >= 1);
  CHECK(remote->stats().errors == 1);  // not asked: a refused connection would have been counted
  // After retry_ms it is asked again: refused connections, counted, and still one warning.
  std::this_thread::sleep_for(std::chrono::milliseconds(3100));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(1))); }) < 900);
  CHECK(remote->stats().errors == 2);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("the remote cache " + server.url() + " failed (GET of an entry: ") != std::string::npos);
  CHECK(remote->warnings()[0].find("kernels still come from the disk cache and the JIT") != std::string::npos);
}

TEST_CASE("a server that accepts and never answers costs one request timeout, then nothing") {
  KILN_SKIP_WITHOUT_REDIS();
  FakeServer silent(FakeServer::Mode::silent);
  // A timeout long enough that "no wait" (< 500 ms) is told from "a timeout" on a loaded CI machine.
  auto remote = remote_at(silent.url("timeout_ms=1500&connect_timeout_ms=1500"));
  const double first = ms_of([&] { CHECK_FALSE(remote->load(sample_key(1))); });
  CHECK(first >= 1400);
  CHECK(first < 5000);
  // The server's thread counts the connection when it polls next (every 50 ms, later on a loaded machine).
  kiln::test::eventually([&] { return silent.connections() > 0; });
  CHECK(silent.connections() == 1);
  CountingBuild build{3};
  const double second = ms_of([&] { build_once(*remote, 3, build); });
  CHECK(second < 500);
  CHECK(build.builds == 1);
  CHECK(silent.connections() == 1);  // the breaker is open: not even a connection
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("no answer within 1500 ms") != std::string::npos);
}

TEST_CASE("a server that answers garbage is a failure, not a hit: one warning, at once") {
  KILN_SKIP_WITHOUT_REDIS();
  FakeServer garbage(FakeServer::Mode::garbage);
  auto remote = remote_at(garbage.url("timeout_ms=3000"));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(1))); }) < 2000);  // at once, not at the timeout
  CountingBuild build{4};
  CHECK_FALSE(build_once(*remote, 4, build).from_remote);
  CHECK(build.builds == 1);
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("not Redis's protocol") != std::string::npos);
}

TEST_CASE("an entry altered in Redis is a miss with one warning, rebuilt and published again") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const kiln::CacheKey key = sample_key(5);
  const std::string name = kiln::test::entry_name(key.hex);
  auto writer = remote_at(server.url());
  REQUIRE(writer->store(key, sample_entry(5)));
  const std::string good = redis.command({"GET", name});
  auto reader = remote_at(server.url());
  // One byte in each part: magic, key id, tag, entry header, key text, frame.
  for (const std::size_t at : {std::size_t{3}, std::size_t{10}, std::size_t{30}, std::size_t{60}, std::size_t{130},
                               good.size() - 5}) {
    std::string altered = good;
    altered[at] = static_cast<char>(altered[at] ^ 0x20);
    redis.command({"SET", name, altered});
    CAPTURE(at);
    CHECK_FALSE(reader->load(key));
  }
  CHECK(reader->stats().rejected == 6);
  REQUIRE(reader->warnings().size() == 1);
  CHECK(reader->warnings()[0].find("ignoring the remote cache's entry for tests/unit_5 sm_90") != std::string::npos);
  // The fleet rebuilds it and publishes a good one over it.
  CountingBuild build{5};
  CHECK_FALSE(build_once(*reader, 5, build).from_remote);
  CHECK(build.builds == 1);
  CHECK(redis.command({"GET", name}) == good);
  CHECK(remote_at(server.url())->load(key));
}

TEST_CASE("an entry without a tag, and one tagged by another fleet key, are misses with one warning") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const kiln::CacheKey key = sample_key(6);
  SUBCASE("no tag: an entry file as the disk has it, put there by someone without the key") {
    redis.command({"SET", kiln::test::entry_name(key.hex), kiln::detail::encode_entry(key, sample_entry(6))});
    auto reader = remote_at(server.url());
    CHECK_FALSE(reader->load(key));
    REQUIRE(reader->warnings().size() == 1);
    CHECK(reader->warnings()[0].find("no authentication tag") != std::string::npos);
  }
  SUBCASE("another fleet key's value, copied to this fleet's name") {
    auto other = remote_at(server.url(), "the other fleet's key, 32 bytes!");
    REQUIRE(other->store(key, sample_entry(6)));
    const std::string theirs = redis.command({"GET", kiln::test::entry_name(key.hex, "the other fleet's key, 32 bytes!")});
    redis.command({"SET", kiln::test::entry_name(key.hex), theirs});
    auto reader = remote_at(server.url());
    CHECK_FALSE(reader->load(key));
    CHECK(reader->stats().rejected == 1);
    REQUIRE(reader->warnings().size() == 1);
    CHECK(reader->warnings()[0].find("another fleet key (id ") != std::string::npos);
    CHECK(reader->warnings()[0].find(reader->fleet_key_id()) != std::string::npos);
  }
}

TEST_CASE("a machine with another fleet key neither reads nor replaces the fleet's entries: no ping-pong") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const std::string wrong_key = "a mistyped fleet key, 32 bytes..";
  auto fleet = remote_at(server.url());
  auto wrong = remote_at(server.url(), wrong_key);
  const kiln::CacheKey key = sample_key(11);
  REQUIRE(fleet->store(key, sample_entry(11)));
  const std::string published = redis.command({"GET", kiln::test::entry_name(key.hex)});
  // The machine with the wrong key finds nothing under its key, builds and publishes there.
  CountingBuild build{11};
  CHECK_FALSE(build_once(*wrong, 11, build).from_remote);
  CHECK(build.builds == 1);
  CHECK(wrong->stats().rejected == 0);
  CHECK(redis.command({"EXISTS", kiln::test::entry_name(key.hex, wrong_key)}) == "1");
  // The fleet's entry is the one it published, and still serves the fleet.
  CHECK(redis.command({"GET", kiln::test::entry_name(key.hex)}) == published);
  CHECK(fleet->load(key));
  CHECK(fleet->stats().rejected == 0);
  CHECK(fleet->warnings().empty());
}

TEST_CASE("a value of another type, or over max_bytes, at one entry's name is a miss for it and replaced: no outage") {
  KILN_SKIP_WITHOUT_REDIS();
  auto& server = kiln::test::fresh_shared_redis();
  RedisClient redis(server.port());
  const kiln::CacheKey bad = sample_key(12);
  const kiln::CacheKey good = sample_key(13);
  REQUIRE(remote_at(server.url())->store(good, sample_entry(13)));
  std::string says;
  SUBCASE("another type") {
    redis.command({"LPUSH", kiln::test::entry_name(bad.hex), "planted"});
    says = "another type";
  }
  SUBCASE("over max_bytes") {
    redis.command({"SET", kiln::test::entry_name(bad.hex), std::string(300'000, 'x')});
    says = "300000 bytes, larger than this machine's max_bytes (100000";
  }
  auto remote = remote_at(server.url("max_bytes=100000"));
  CHECK_FALSE(remote->load(bad));
  CHECK(remote->stats().rejected == 1);
  CHECK(remote->stats().errors == 0);
  CHECK(remote->load(good));  // the breaker stayed closed: every other entry is served
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find(says) != std::string::npos);
  // Rebuilt and published over the bad value.
  CountingBuild build{12};
  CHECK_FALSE(build_once(*remote, 12, build).from_remote);
  CHECK(build.builds == 1);
  CHECK(remote_at(server.url())->load(bad));
  CHECK(remote->stats().errors == 0);
}

TEST_CASE("a reply announcing a 1 GB string is refused from its first bytes, never read to a cap") {
  KILN_SKIP_WITHOUT_REDIS();
  FakeServer huge(FakeServer::Mode::huge_value);
  auto remote = remote_at(huge.url("timeout_ms=5000"));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(1))); }) < 4000);
  CHECK(remote->stats().rejected == 1);  // a bad value at that name, not a failure of the store
  CHECK(remote->stats().errors == 0);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("1000000000 bytes, larger than this machine's max_bytes") != std::string::npos);
  // The connection was closed after its first bytes: the server could send little more than its socket holds.
  kiln::test::eventually([&] { return huge.finished(); });
  CHECK(huge.sent() < 32u << 20);
}

TEST_CASE("a reply announcing an array of 10^8 elements, then sending them without end, is refused at its header") {
  KILN_SKIP_WITHOUT_REDIS();
  FakeServer endless(FakeServer::Mode::endless_array);
  auto remote = remote_at(endless.url("timeout_ms=5000"));
  CHECK_FALSE(remote->load(sample_key(1)));
  CHECK(remote->stats().errors == 1);  // no Redis answers GET so: a failure of the store
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("announces an array of 100000000 elements, more than a reply may hold (1024)") !=
        std::string::npos);
  // The connection was closed after the header: the server could send little more than its socket holds.
  kiln::test::eventually([&] { return endless.finished(); });
  CHECK(endless.sent() < 16u << 20);
}

TEST_CASE("a reply of many strings, each under max_bytes, is cut when its bytes together pass max_bytes") {
  KILN_SKIP_WITHOUT_REDIS();
  FakeServer many(FakeServer::Mode::many_strings);
  auto remote = remote_at(many.url("timeout_ms=5000&max_bytes=100000"));
  CHECK_FALSE(remote->load(sample_key(1)));
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("is larger than 104096 bytes") != std::string::npos);
  kiln::test::eventually([&] { return many.finished(); });
  CHECK(many.sent() < 16u << 20);
}

TEST_CASE("a server that wants a password: one warning that says how to give it, not a full server's hint") {
  KILN_SKIP_WITHOUT_REDIS();
  kiln::test::RedisServer server({"--requirepass", "s3cret-pass"});
  auto remote = remote_at(server.url());
  CountingBuild build{1};
  CHECK_FALSE(build_once(*remote, 1, build).from_remote);  // the lease first: it was "refused", as by a full server
  CHECK(build.builds == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("NOAUTH") != std::string::npos);
  CHECK(remote->warnings()[0].find("redis://:PASSWORD@host") != std::string::npos);
  CHECK(remote->warnings()[0].find("maxmemory") == std::string::npos);
  // The password given: it works.
  auto with_password = remote_at("redis://:s3cret-pass@127.0.0.1:" + std::to_string(server.port()) + "/0");
  CHECK(with_password->store(sample_key(2), sample_entry(2)));
  CHECK(with_password->load(sample_key(2)));
}

TEST_CASE("Redis at its memory limit (noeviction): reads go on, writes and leases are refused, builds go on") {
  KILN_SKIP_WITHOUT_REDIS();
  kiln::test::RedisServer server({"--maxmemory-policy", "noeviction"});
  RedisClient redis(server.port());
  auto remote = remote_at(server.url());
  REQUIRE(remote->store(sample_key(1), sample_entry(1)));
  // Over its limit for good: 4 MiB of data, then a limit of 2 MiB. (Filling up to a limit leaves it
  // hovering around it: Redis counts a command's buffers, which come and go.)
  const std::string ballast(64 * 1024, 'x');
  for (int i = 0; i < 64; ++i) redis.command({"SET", "ballast:" + std::to_string(i), ballast});
  REQUIRE(redis.command({"CONFIG", "SET", "maxmemory", "2mb"}) == "OK");
  REQUIRE(redis.command({"SET", "one:more", "x"}).starts_with("OOM"));

  CHECK(remote->load(sample_key(1)));  // what is there is still served
  CHECK_FALSE(remote->store(sample_key(2), sample_entry(2)));
  CountingBuild build{3};
  double ms = ms_of([&] { CHECK(kiln::test::same_entry(build_once(*remote, 3, build).entry, sample_entry(3))); });
  CHECK(ms < 5000);  // no lease wait (wait_ms: 120 s)
  CHECK(build.builds == 1);
  CHECK(remote->stats().refused >= 2);
  CHECK(remote->stats().errors == 0);  // refusals are not failures: the breaker stays closed
  CHECK(kiln::test::has_warning(*remote, "refuses to store entries"));
  CHECK(kiln::test::has_warning(*remote, "maxmemory"));
  CHECK(remote->warnings().size() <= 2);
  CHECK(remote->load(sample_key(1)));
}

TEST_SUITE_END();
