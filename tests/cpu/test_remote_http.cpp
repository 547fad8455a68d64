// The remote tier's HTTP(S) store against a real nginx (WebDAV PUT, TLS from a certificate made here):
// entries in and out as files of a plain tree, TLS verified, credentials from a file, a read-only token,
// and the faults nginx can make: a dead server, 5xx, a redirect, a wrong token, an altered or oversized
// file. Each is a miss or a soft failure with one warning, never a hang or a wrong kernel.
#include <doctest/doctest.h>

#include "chain/entry.hpp"
#include "http_test_util.hpp"
#include "one_unit.hpp"
#include "registry/query.hpp"  // make_chain
#include "remote/remote_tier.hpp"
#include "remote/sealed_entry.hpp"

#include <kiln/remote.hpp>

#include <thread>

using kiln::test::entry_file;
using kiln::test::has_warning;
using kiln::test::ms_of;
using kiln::test::NginxServer;
using kiln::test::remote_with;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::TempDir;
using kiln::test::write_secret;

TEST_SUITE_BEGIN("remote_http");

namespace {

// One nginx for the suite's cases (each uses keys of its own).
NginxServer& nginx() {
  static NginxServer server;
  return server;
}

}  // namespace

TEST_CASE("an entry goes to nginx over TLS as the file kiln/<key id>/entry/<key> under the base, sealed, and comes back verified") {
  NginxServer& server = nginx();
  const kiln::CacheKey key = sample_key(101);
  auto writer = remote_with(server.url("open/fleet"));
  REQUIRE(writer->usable());
  CHECK(writer->where() == "https://127.0.0.1:" + std::to_string(server.port()) + "/open/fleet");
  CHECK_FALSE(writer->load(key));
  CHECK(writer->stats().misses == 1);
  REQUIRE(writer->store(key, sample_entry(101)));

  const std::string file = kiln::test::read_file(entry_file(server.root("open") / "fleet", key.hex));
  CHECK(file.starts_with(kiln::detail::kSealMagic));
  CHECK(file.ends_with(kiln::detail::encode_entry(key, sample_entry(101))));
  CHECK(writer->stats().bytes_written == file.size());

  auto reader = remote_with(server.url("open/fleet"));
  const auto loaded = reader->load(key);
  REQUIRE(loaded);
  CHECK(kiln::test::same_entry(*loaded, sample_entry(101)));
  CHECK(reader->stats().hits == 1);
  CHECK(kiln::test::store_of(*reader).contains(kiln::test::entry_name(key.hex)));
  CHECK_FALSE(kiln::test::store_of(*reader).contains(kiln::test::entry_name(sample_key(102).hex)));
  CHECK(reader->warnings().empty());
  CHECK(writer->warnings().empty());
}

TEST_CASE("TLS is verified: a certificate nobody said to trust is a failure with one warning, not a connection") {
  NginxServer& server = nginx();
  const std::string untrusted = "https://127.0.0.1:" + std::to_string(server.port()) + "/open/fleet";
  auto remote = remote_with(untrusted);
  REQUIRE(remote->usable());
  CHECK_FALSE(remote->load(sample_key(103)));
  CHECK_FALSE(remote->store(sample_key(103), sample_entry(103)));  // the breaker is open: not even asked
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("certificate") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(entry_file(server.root("open") / "fleet", sample_key(103).hex)));
}

TEST_CASE("a bearer token from a file: a read-write one publishes, a read-only one reads and its writes are refused once, softly") {
  NginxServer& server = nginx();
  TempDir dir;
  const kiln::CacheKey key = sample_key(104);
  auto writer = remote_with(server.url("auth"), write_secret(dir.path() / "rw", "rw-token\n"));
  REQUIRE(writer->store(key, sample_entry(104)));
  auto reader = remote_with(server.url("auth"), write_secret(dir.path() / "ro", "Bearer ro-token\n"));
  CHECK(reader->load(key));
  CHECK_FALSE(reader->store(sample_key(105), sample_entry(105)));
  CHECK_FALSE(reader->store(sample_key(106), sample_entry(106)));
  CHECK(reader->stats().refused == 2);
  CHECK(reader->stats().errors == 0);  // a refusal, not a failure: reads go on
  CHECK(reader->load(key));
  CHECK(reader->stats().hits == 2);
  REQUIRE(reader->warnings().size() == 1);
  CHECK(reader->warnings()[0].find("HTTP 403") != std::string::npos);
  CHECK(reader->warnings()[0].find("read-only token") != std::string::npos);
}

TEST_CASE("a read-only token through the fleet's single flight: the lease and the publish refused, one warning, built here") {
  NginxServer& server = nginx();
  TempDir dir;
  auto reader = remote_with(server.url("auth"), write_secret(dir.path() / "ro", "ro-token\n"));
  int builds = 0;
  const auto built = kiln::detail::build_once_in_fleet(reader.get(), sample_key(118), [&] {
    ++builds;
    return sample_entry(118);
  });
  CHECK(builds == 1);
  CHECK_FALSE(built.from_remote);
  CHECK(reader->stats().refused == 2);  // the lease's PUT, then the entry's
  CHECK(reader->stats().errors == 0);
  REQUIRE(reader->warnings().size() == 1);
  CHECK(reader->warnings()[0].find("refuses to store entries and leases (HTTP 403") != std::string::npos);
  CHECK(reader->warnings()[0].find("read-only token") != std::string::npos);
}

TEST_CASE("a wrong token is a failure: one warning naming the file, then the store is left alone for retry_ms") {
  NginxServer& server = nginx();
  TempDir dir;
  auto remote = remote_with(server.url("auth", "retry_ms=60000"), write_secret(dir.path() / "token", "Bearer wrong\n"));
  CHECK_FALSE(remote->load(sample_key(107)));
  CHECK_FALSE(remote->load(sample_key(107)));
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("HTTP 401") != std::string::npos);
  CHECK(remote->warnings()[0].find("KILN_REMOTE_AUTH_FILE") != std::string::npos);
}

TEST_CASE("a credential file others can read is used with one warning; one they can write, or a bad one, is refused") {
  NginxServer& server = nginx();
  TempDir dir;
  auto readable = remote_with(server.url("auth"), write_secret(dir.path() / "readable", "ro-token\n", 0644));
  CHECK(readable->usable());
  CHECK(has_warning(*readable, "chmod 600"));
  auto writable = remote_with(server.url("auth"), write_secret(dir.path() / "writable", "ro-token\n", 0666));
  CHECK_FALSE(writable->usable());
  CHECK(writable->unusable_reason().message.find("can write it") != std::string::npos);
  auto two_words = remote_with(server.url("auth"), write_secret(dir.path() / "bad", "Token a b\n"));
  CHECK_FALSE(two_words->usable());
  CHECK(two_words->unusable_reason().message.find("'Bearer TOKEN', 'Basic USER:PASSWORD' or a bare token") != std::string::npos);
  auto missing = remote_with(server.url("auth"), dir.path() / "none");
  CHECK_FALSE(missing->usable());
  CHECK(missing->unusable_reason().message.find("KILN_REMOTE_AUTH_FILE") != std::string::npos);
}

TEST_CASE("a redirect is refused, not followed: one warning, a miss") {
  NginxServer& server = nginx();
  auto remote = remote_with(server.url("moved"));
  CHECK_FALSE(remote->load(sample_key(108)));
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("redirect (HTTP 302") != std::string::npos);
  CHECK(remote->warnings()[0].find("does not follow") != std::string::npos);
}

TEST_CASE("a server error (5xx) is a failure: one warning, then no request until retry_ms") {
  NginxServer& server = nginx();
  auto remote = remote_with(server.url("broken", "retry_ms=60000"));
  CHECK_FALSE(remote->load(sample_key(109)));
  const auto built = kiln::detail::build_once_in_fleet(remote.get(), sample_key(109), [] { return sample_entry(109); });
  CHECK_FALSE(built.from_remote);
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped >= 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("HTTP 503") != std::string::npos);
}

TEST_CASE("a server that takes no PUT refuses softly, with the nginx directive in the warning") {
  NginxServer& server = nginx();
  auto remote = remote_with(server.url("nodav"));
  CHECK_FALSE(remote->store(sample_key(110), sample_entry(110)));
  CHECK(remote->stats().refused == 1);
  CHECK(remote->stats().errors == 0);
  CHECK(has_warning(*remote, "dav_methods PUT DELETE"));
}

TEST_CASE("an altered file is a miss with one warning; the entry rebuilt is published over it") {
  NginxServer& server = nginx();
  const kiln::CacheKey key = sample_key(111);
  const auto path = entry_file(server.root("open") / "altered", key.hex);
  auto writer = remote_with(server.url("open/altered"));
  REQUIRE(writer->store(key, sample_entry(111)));
  const std::string good = kiln::test::read_file(path);
  std::string forged = good;
  forged[good.size() - 7] = static_cast<char>(forged[good.size() - 7] ^ 0x40);
  kiln::test::write_file(path, forged);
  auto reader = remote_with(server.url("open/altered"));
  CHECK_FALSE(reader->load(key));
  CHECK(reader->stats().rejected == 1);
  CHECK(reader->stats().errors == 0);
  CHECK(has_warning(*reader, "does not verify"));
  REQUIRE(reader->store(key, sample_entry(111)));
  CHECK(kiln::test::read_file(path) == good);
  CHECK(remote_with(server.url("open/altered"))->load(key));
  // Not a sealed value at all, and cut short: misses too.
  kiln::test::write_file(path, "<html>not an entry</html>");
  CHECK_FALSE(reader->load(key));
  kiln::test::write_file(path, good.substr(0, good.size() / 2));
  CHECK_FALSE(reader->load(key));
  CHECK(reader->stats().rejected == 3);
  CHECK(reader->stats().errors == 0);
}

TEST_CASE("a file over max_bytes is not read: a miss for its key, not a failure of the store") {
  NginxServer& server = nginx();
  const kiln::CacheKey key = sample_key(112);
  kiln::test::write_file(entry_file(server.root("open") / "large", key.hex), std::string(3 << 20, 'x'));
  auto reader = remote_with(server.url("open/large", "max_bytes=1048576"));
  CHECK_FALSE(reader->load(key));
  CHECK(reader->stats().rejected == 1);
  CHECK(reader->stats().errors == 0);
  CHECK(reader->stats().bytes_read == 0);
  CHECK(has_warning(*reader, "3145728 bytes, larger than this machine's max_bytes"));
  CHECK(reader->store(sample_key(113), sample_entry(113)));  // every other name is still served
}

TEST_CASE("a dead server: refused at once, one warning, then not asked until retry_ms; asked again after") {
  NginxServer server(false);  // its own: killed below
  auto remote = remote_with(server.url("open", "retry_ms=1500"));
  REQUIRE(remote->store(sample_key(114), sample_entry(114)));
  server.kill();
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(114))); }) < 900);
  CHECK(remote->stats().errors == 1);
  CHECK_FALSE(remote->load(sample_key(114)));
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  CHECK_FALSE(remote->load(sample_key(114)));
  CHECK(remote->stats().errors == 2);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("Failed to connect to 127.0.0.1") != std::string::npos);
}

TEST_CASE("leases as objects on nginx: taken, held against another, renewed, released; a dead holder's expires") {
  NginxServer& server = nginx();
  auto a = remote_with(server.url("open/leases"));
  auto b = remote_with(server.url("open/leases"));
  const std::string lease = kiln::test::lease_name(sample_key(115).hex);
  const auto ttl = std::chrono::milliseconds(1000);
  CHECK(kiln::test::store_of(*a).try_lease(lease, "a", ttl).kind == kiln::RemoteReply::done);
  CHECK(std::filesystem::exists(kiln::test::lease_file(server.root("open") / "leases", sample_key(115).hex)));
  CHECK(kiln::test::store_of(*b).try_lease(lease, "b", ttl).kind == kiln::RemoteReply::held);
  CHECK(kiln::test::store_of(*b).lease_held(lease, ttl));
  CHECK_FALSE(kiln::test::store_of(*b).renew_lease(lease, "b", ttl));
  CHECK(kiln::test::store_of(*a).renew_lease(lease, "a", ttl));
  kiln::test::store_of(*b).release_lease(lease, "b");  // not b's: stays
  CHECK(kiln::test::store_of(*b).try_lease(lease, "b", ttl).kind == kiln::RemoteReply::held);
  kiln::test::store_of(*a).release_lease(lease, "a");
  CHECK_FALSE(kiln::test::store_of(*b).lease_held(lease, ttl));
  CHECK(kiln::test::store_of(*b).try_lease(lease, "b", ttl).kind == kiln::RemoteReply::done);
  // b dies holding it: a takes it over once it is older than its ttl (and Last-Modified's second).
  CHECK(kiln::test::store_of(*a).try_lease(lease, "a", ttl).kind == kiln::RemoteReply::held);
  bool taken = false;
  CHECK(kiln::test::eventually(
      [&] {
        if (!taken) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          taken = kiln::test::store_of(*a).try_lease(lease, "a", ttl).kind == kiln::RemoteReply::done;
        }
        return taken;
      },
      std::chrono::seconds(10)));
  // A lease that would outlive this fleet's lease_ms is taken over at once.
  CHECK(kiln::test::store_of(*b).try_lease(lease, "b", std::chrono::milliseconds(500)).kind == kiln::RemoteReply::done);
}

TEST_CASE("with a Redis too: leases on Redis, entries read through it and published to both") {
  KILN_SKIP_WITHOUT_REDIS();
  NginxServer& server = nginx();
  auto& redis_server = kiln::test::fresh_shared_redis();
  kiln::test::RedisClient redis(redis_server.port());
  const std::string url = redis_server.url() + " " + server.url("open/tiered");
  const kiln::CacheKey key = sample_key(116);
  auto writer = remote_with(url);
  REQUIRE(writer->usable());
  CHECK(writer->where() == redis_server.url() + " + https://127.0.0.1:" + std::to_string(server.port()) + "/open/tiered");
  REQUIRE(writer->store(key, sample_entry(116)));
  const std::string name = kiln::test::entry_name(key.hex);
  CHECK(redis.command({"GET", name}) == kiln::test::read_file(entry_file(server.root("open") / "tiered", key.hex)));
  // Gone from Redis (evicted, expired): read from nginx, and put back into Redis.
  redis.command({"DEL", name});
  auto reader = remote_with(url);
  CHECK(reader->load(key));
  CHECK(redis.command({"EXISTS", name}) == "1");
  // The lease is Redis's SET NX: nothing of it on nginx.
  const std::string lease = kiln::test::lease_name(key.hex);
  CHECK(kiln::test::store_of(*reader).try_lease(lease, "t", std::chrono::milliseconds(5000)).kind == kiln::RemoteReply::done);
  CHECK(redis.command({"GET", lease}) == "t");
  CHECK_FALSE(std::filesystem::exists(kiln::test::lease_file(server.root("open") / "tiered", key.hex)));
  CHECK(reader->warnings().empty());
}

TEST_CASE("the fleet's single flight over nginx alone: a waiter gets the holder's entry, built once") {
  NginxServer& server = nginx();
  auto holder = remote_with(server.url("open/flight"));
  auto waiter = remote_with(server.url("open/flight"));
  const kiln::CacheKey key = sample_key(117);
  kiln::detail::Claim claim = kiln::detail::fleet_store(*holder)->claim(key, {});
  REQUIRE(claim.hold);
  std::atomic<bool> from_remote{false};
  int builds = 0;
  std::thread waiting([&] {
    const auto got = kiln::detail::build_once_in_fleet(waiter.get(), key, [&] {
      ++builds;
      return sample_entry(117);
    });
    from_remote = got.from_remote;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(claim.hold->publish(sample_entry(117)).ok());
  waiting.join();
  CHECK(from_remote);
  CHECK(builds == 0);
  CHECK(waiter->stats().lease_waits == 1);
}

TEST_CASE("the chain over nginx: machine A's entry is verified, written to machine B's disk, served as Tier::remote") {
  NginxServer& server = nginx();
  kiln::test::OneUnit one;
  auto a = remote_with(server.url("open/chain"));
  REQUIRE(a->store(one.key(), sample_entry(1)));
  TempDir tmp;
  kiln::DiskCache disk(kiln::test::config_at(tmp.path()));
  auto b = remote_with(server.url("open/chain"));
  const kiln::RegistryOptions options{.allow_ptx = false, .use_embedded = false, .cache = &disk, .use_jit = false,
                                      .remote = b.get()};
  const kiln::detail::TierChain chain = kiln::detail::make_chain(one.catalog, options);
  const kiln::detail::UnitQuery query = chain.query(one.catalog.kernels[0], 90);
  const auto plan = chain.probe(query);  // a HEAD
  REQUIRE(plan);
  CHECK(plan->source == kiln::Tier::remote);
  const kiln::detail::UnitImage image = chain.fetch(query);
  CHECK(image.tier == kiln::Tier::remote);
  CHECK(image.owned == sample_entry(1).cubin);
  CHECK(image.label.find("from the remote cache " + b->where()) != std::string::npos);
  REQUIRE(disk.contains(one.key()));
  CHECK(chain.fetch(query).tier == kiln::Tier::disk);
  CHECK(b->stats().hits == 1);
  CHECK(b->warnings().empty());
}

TEST_CASE("with a Redis too, each store has its own breaker: Redis out, nginx serves and holds the leases") {
  KILN_SKIP_WITHOUT_REDIS();
  NginxServer& server = nginx();
  kiln::test::RedisServer redis_server;  // its own: killed below
  const std::string url = redis_server.url() + " " + server.url("open/redis-out", "retry_ms=60000");
  const kiln::CacheKey key = sample_key(119);
  REQUIRE(remote_with(url)->store(key, sample_entry(119)));
  redis_server.kill();
  auto reader = remote_with(url);
  CHECK(reader->load(key));
  CHECK(reader->load(key));  // Redis is not asked again for retry_ms; nginx is
  CHECK(reader->stats().hits == 2);
  CHECK(reader->stats().errors == 1);
  CHECK(reader->stats().skipped == 0);
  REQUIRE(reader->warnings().size() == 1);
  CHECK(reader->warnings()[0].find("store " + redis_server.url()) != std::string::npos);
  CHECK(reader->warnings()[0].find("the other store") != std::string::npos);
  // Publishing and leases go on without it: an entry and a lease object on nginx.
  const kiln::CacheKey other = sample_key(120);
  CHECK(reader->store(other, sample_entry(120)));
  CHECK(std::filesystem::exists(entry_file(server.root("open") / "redis-out", other.hex)));
  const std::string lease = kiln::test::lease_name(other.hex);
  CHECK(kiln::test::store_of(*reader).try_lease(lease, "t", std::chrono::milliseconds(5000)).kind == kiln::RemoteReply::done);
  CHECK(std::filesystem::exists(kiln::test::lease_file(server.root("open") / "redis-out", other.hex)));
  CHECK(reader->stats().errors == 1);
}

TEST_CASE("with a Redis too, each store has its own breaker: the object store failing, Redis takes and serves entries") {
  KILN_SKIP_WITHOUT_REDIS();
  NginxServer& server = nginx();
  auto& redis_server = kiln::test::fresh_shared_redis();
  kiln::test::RedisClient redis(redis_server.port());
  auto remote = remote_with(redis_server.url() + " " + server.url("broken", "retry_ms=60000"));
  const kiln::CacheKey key = sample_key(121);
  CHECK(remote->store(key, sample_entry(121)));
  CHECK(redis.command({"EXISTS", kiln::test::entry_name(key.hex)}) == "1");
  CHECK(remote->load(key));
  CHECK_FALSE(remote->load(sample_key(122)));  // Redis's answer: a miss, not a failure
  CHECK(remote->stats().hits == 1);
  CHECK(remote->stats().misses == 1);
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped == 0);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("HTTP 503") != std::string::npos);
}

TEST_CASE("push writes over an object that does not verify, where a write-once PUT would keep it") {
  NginxServer& server = nginx();
  const kiln::CacheKey key = sample_key(123);
  const auto path = entry_file(server.root("open") / "push", key.hex);
  TempDir tmp;
  kiln::DiskCache disk(kiln::test::config_at(tmp.path()));
  REQUIRE(disk.store(key, sample_entry(123)));
  auto remote = remote_with(server.url("open/push"));
  kiln::PushReport pushed = kiln::push(disk, *remote);
  CHECK(pushed.pushed == 1);
  CHECK(pushed.replaced == 0);
  const std::string good = kiln::test::read_file(path);
  for (const std::string& bad : {good.substr(0, good.size() / 2), std::string("<html>not an entry</html>"),
                                 good.substr(0, good.size() - 1) + static_cast<char>(good.back() ^ 1)}) {
    kiln::test::write_file(path, bad);
    pushed = kiln::push(disk, *remote);
    CHECK(pushed.pushed == 1);
    CHECK(pushed.replaced == 1);
    CHECK(kiln::test::read_file(path) == good);
  }
  CHECK(remote_with(server.url("open/push"))->load(key));
  // One that verifies is no repair (nginx writes it again regardless: it ignores If-None-Match).
  pushed = kiln::push(disk, *remote);
  CHECK(pushed.pushed == 1);
  CHECK(pushed.replaced == 0);
  CHECK(kiln::test::read_file(path) == good);
}
