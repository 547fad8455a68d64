// The remote tier's S3 store against tests/cpu/object_server.py (an S3 subset that verifies every SigV4
// signature and honours conditional writes), the faults real servers do not make on demand (a dribbling
// server, a cut-short body, a huge one, garbage, silence), and the store URLs' parsing.
#include <doctest/doctest.h>

#include "http_test_util.hpp"
#include "remote/remote_tier.hpp"

#include <kiln/remote.hpp>

#include <atomic>
#include <thread>

using kiln::test::has_warning;
using kiln::test::ms_of;
using kiln::test::ObjectServer;
using kiln::test::remote_with;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::TempDir;

TEST_SUITE_BEGIN("remote_object");

namespace {

ObjectServer& s3() {
  static ObjectServer server("s3");
  return server;
}

}  // namespace

TEST_CASE("S3: entries signed with SigV4 go under the bucket's prefix and come back verified") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  const kiln::CacheKey key = sample_key(201);
  auto writer = remote_with(s3().s3_url("kiln-cache/ci/a"), credentials);
  REQUIRE(writer->usable());
  CHECK(writer->where() == "s3://kiln-cache/ci/a (us-east-1 at " + s3().endpoint() + ")");
  CHECK_FALSE(writer->load(key));
  CHECK(writer->stats().misses == 1);
  REQUIRE(writer->store(key, sample_entry(201)));
  auto reader = remote_with(s3().s3_url("kiln-cache/ci/a"), credentials);
  const auto loaded = reader->load(key);
  REQUIRE(loaded);
  CHECK(kiln::test::same_entry(*loaded, sample_entry(201)));
  CHECK(kiln::test::store_of(*reader).contains(kiln::test::entry_name(key.hex)));
  CHECK_FALSE(remote_with(s3().s3_url("kiln-cache/ci/b"), credentials)->load(key));  // another prefix
  CHECK(reader->warnings().empty());
  CHECK(writer->warnings().empty());
}

TEST_CASE("S3: a wrong secret is refused by the server's signature check: a failure with one warning") {
  TempDir dir;
  auto remote = remote_with(s3().s3_url("kiln-cache/ci/a"), kiln::test::s3_credentials(dir.path(), "not-the-secret"));
  CHECK_FALSE(remote->load(sample_key(202)));
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("HTTP 403") != std::string::npos);
  CHECK(remote->warnings()[0].find("SignatureDoesNotMatch") != std::string::npos);
}

TEST_CASE("S3: entries are written once: a second machine's publish keeps the first (412 is no error)") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  const kiln::CacheKey key = sample_key(203);
  auto first = remote_with(s3().s3_url("kiln-cache/once"), credentials);
  auto second = remote_with(s3().s3_url("kiln-cache/once"), credentials);
  REQUIRE(first->store(key, sample_entry(203)));
  const kiln::CacheEntry other = sample_entry(203, 90, 2048);  // the same key, other bytes
  CHECK(second->store(key, other));
  CHECK(second->stats().errors == 0);
  CHECK(second->stats().refused == 0);
  const auto loaded = remote_with(s3().s3_url("kiln-cache/once"), credentials)->load(key);
  REQUIRE(loaded);
  CHECK(kiln::test::same_entry(*loaded, sample_entry(203)));
}

TEST_CASE("S3: a value rejected here is replaced by the entry rebuilt, despite write-once") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  const kiln::CacheKey key = sample_key(204);
  auto planter = remote_with(s3().s3_url("kiln-cache/planted"), credentials);
  REQUIRE(kiln::test::store_of(*planter).put(kiln::test::entry_name(key.hex), "planted", std::chrono::hours(1)).kind ==
          kiln::RemoteReply::done);
  auto machine = remote_with(s3().s3_url("kiln-cache/planted"), credentials);
  CHECK_FALSE(machine->load(key));
  CHECK(machine->stats().rejected == 1);
  REQUIRE(machine->store(key, sample_entry(204)));
  CHECK(remote_with(s3().s3_url("kiln-cache/planted"), credentials)->load(key));
}

TEST_CASE("S3: lease objects by conditional PUT: of several machines at once exactly one builds, the others get its entry") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  const kiln::CacheKey key = sample_key(205);
  std::vector<std::unique_ptr<kiln::RemoteCache>> machines;
  for (int i = 0; i < 4; ++i) machines.push_back(remote_with(s3().s3_url("kiln-cache/flight"), credentials));
  std::atomic<int> builds{0}, from_remote{0};
  std::vector<std::thread> threads;
  for (auto& m : machines)
    threads.emplace_back([&, remote = m.get()] {
      const auto got = kiln::detail::build_once_in_fleet(remote, key, [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return sample_entry(205);
      });
      if (got.from_remote) ++from_remote;
    });
  for (auto& t : threads) t.join();
  CHECK(builds == 1);
  CHECK(from_remote == 3);
  for (auto& m : machines) CHECK(m->stats().errors == 0);
}

TEST_CASE("S3: a lease whose holder died expires; one that would outlive lease_ms is taken over") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  auto a = remote_with(s3().s3_url("kiln-cache/leases"), credentials);
  auto b = remote_with(s3().s3_url("kiln-cache/leases"), credentials);
  const std::string lease = kiln::test::lease_name(sample_key(206).hex);
  const auto ttl = std::chrono::milliseconds(1000);
  CHECK(kiln::test::store_of(*a).try_lease(lease, "a", ttl).kind == kiln::RemoteReply::done);
  CHECK(kiln::test::store_of(*b).try_lease(lease, "b", ttl).kind == kiln::RemoteReply::held);
  bool taken = false;
  CHECK(kiln::test::eventually(
      [&] {
        if (!taken) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          taken = kiln::test::store_of(*b).try_lease(lease, "b", ttl).kind == kiln::RemoteReply::done;
        }
        return taken;
      },
      std::chrono::seconds(10)));
  CHECK_FALSE(kiln::test::store_of(*a).renew_lease(lease, "a", ttl));  // b's now
  CHECK(kiln::test::store_of(*a).try_lease(lease, "a", std::chrono::milliseconds(200)).kind == kiln::RemoteReply::done);
}

TEST_CASE("S3 against npm's s3rver: entries signed, stored and verified; a live lease object is held against another") {
  if (kiln::test::s3rver_path().empty()) {
    MESSAGE("skipped: s3rver is not installed (scripts/setup.sh installs it with npm)");
    return;
  }
  kiln::test::S3rverServer server;
  TempDir dir;
  const auto credentials = kiln::test::write_secret(dir.path() / "credentials",
                                                    "aws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n");
  const kiln::CacheKey key = sample_key(213);
  auto writer = remote_with(server.s3_url("fleet"), credentials);
  CHECK_FALSE(writer->load(key));
  REQUIRE(writer->store(key, sample_entry(213)));
  auto reader = remote_with(server.s3_url("fleet"), credentials);
  const auto loaded = reader->load(key);
  REQUIRE(loaded);
  CHECK(kiln::test::same_entry(*loaded, sample_entry(213)));
  CHECK(kiln::test::store_of(*reader).contains(kiln::test::entry_name(key.hex)));
  const std::string lease = kiln::test::lease_name(key.hex);
  const auto ttl = std::chrono::milliseconds(5000);
  CHECK(kiln::test::store_of(*writer).try_lease(lease, "w", ttl).kind == kiln::RemoteReply::done);
  CHECK(kiln::test::store_of(*reader).try_lease(lease, "r", ttl).kind == kiln::RemoteReply::held);
  CHECK(kiln::test::store_of(*writer).renew_lease(lease, "w", ttl));
  kiln::test::store_of(*writer).release_lease(lease, "w");
  CHECK(kiln::test::store_of(*reader).try_lease(lease, "r", ttl).kind == kiln::RemoteReply::done);
  CHECK(writer->stats().errors == 0);
  CHECK(reader->stats().errors == 0);
  CHECK(reader->warnings().empty());
}

TEST_CASE("a server that dribbles its answer costs one timeout_ms, then it is left alone") {
  ObjectServer dribble("dribble");
  auto remote = remote_with(dribble.http_url("cache", "timeout_ms=1500&retry_ms=60000"));
  const double first = ms_of([&] { CHECK_FALSE(remote->load(sample_key(207))); });
  CHECK(first >= 1400);
  CHECK(first < 5000);
  const long asked = dribble.requests();
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(207))); }) < 500);
  CHECK_FALSE(remote->store(sample_key(207), sample_entry(207)));
  CHECK(dribble.requests() == asked);  // the breaker: no request at all
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().skipped == 2);
  REQUIRE(remote->warnings().size() == 1);
  CHECK(remote->warnings()[0].find("no whole answer within 1500 ms") != std::string::npos);
}

TEST_CASE("a server that never answers costs one timeout_ms") {
  ObjectServer silent("silent");
  auto remote = remote_with(silent.http_url("cache", "timeout_ms=1000"));
  const double first = ms_of([&] { CHECK_FALSE(remote->load(sample_key(208))); });
  CHECK(first >= 900);
  CHECK(first < 5000);
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
}

TEST_CASE("a body cut short is a failure, at once, never a hit") {
  ObjectServer truncated("truncated");
  auto remote = remote_with(truncated.http_url("cache", "timeout_ms=3000"));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(209))); }) < 2000);
  CHECK(remote->stats().errors == 1);
  CHECK(remote->stats().hits == 0);
  REQUIRE(remote->warnings().size() == 1);
}

TEST_CASE("a body announced over max_bytes is not read: a miss for its key, at once") {
  ObjectServer huge("huge");
  auto remote = remote_with(huge.http_url("cache", "timeout_ms=3000&max_bytes=1048576"));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(210))); }) < 2000);
  CHECK(remote->stats().rejected == 1);
  CHECK(remote->stats().errors == 0);
  CHECK(has_warning(*remote, "1000000000 bytes, larger than this machine's max_bytes"));
}

TEST_CASE("an answer that is not HTTP is a failure with one warning") {
  ObjectServer garbage("garbage");
  auto remote = remote_with(garbage.http_url("cache", "timeout_ms=3000"));
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(211))); }) < 2000);
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
}

TEST_CASE("a port nothing listens on: refused at once, one warning") {
  const unsigned port = kiln::test::free_port();
  auto remote = remote_with("http://127.0.0.1:" + std::to_string(port) + "/cache");
  CHECK(ms_of([&] { CHECK_FALSE(remote->load(sample_key(212))); }) < 900);
  CHECK(remote->stats().errors == 1);
  REQUIRE(remote->warnings().size() == 1);
}

TEST_CASE("store URLs: what each part must be, said with the URL; credentials never in it") {
  const auto reason = [](const std::string& url) {
    auto remote = remote_with(url);
    CHECK_FALSE(remote->usable());
    return remote->unusable_reason().message;
  };
  CHECK(reason("https://user:secret@cache.example/kiln").find("KILN_REMOTE_AUTH_FILE") != std::string::npos);
  CHECK(reason("https://user:secret@cache.example/kiln").find("secret") == std::string::npos);
  CHECK(reason("https:///kiln").find("no host") != std::string::npos);
  CHECK(reason("https://h/kiln?colour=blue").find("unknown setting 'colour'") != std::string::npos);
  CHECK(reason("https://h/kiln?colour=blue").find("ca_file") != std::string::npos);
  CHECK(reason("s3://Bad_Bucket/x?region=us-east-1").find("not a bucket name") != std::string::npos);
  CHECK(reason("s3://bucket/x?region=us-east-1&endpoint=ftp://h").find("must start with https://") != std::string::npos);
  CHECK(reason("redis://h:1 redis://h:2").find("names 2 stores") != std::string::npos);
  CHECK(reason("redis://h:1 https://h/a s3://b/c").find("names 3 stores") != std::string::npos);
  // An S3 store without credentials (the environment's are not set in the tests).
  if (std::getenv("AWS_ACCESS_KEY_ID") == nullptr)
    CHECK(reason("s3://bucket/x?region=us-east-1").find("needs credentials") != std::string::npos);
  if (std::getenv("AWS_REGION") == nullptr && std::getenv("AWS_DEFAULT_REGION") == nullptr)
    CHECK(reason("s3://bucket/x").find("no region") != std::string::npos);
  // Settings apply to an object store as to Redis; its bounds default longer (TLS, other regions).
  auto remote = remote_with("https://h/kiln?mode=ro&lease_ms=2000");
  REQUIRE(remote->usable());
  CHECK(remote->settings().read_only);
  CHECK(remote->settings().lease_ttl == std::chrono::milliseconds(2000));
  CHECK(remote->settings().request_timeout == std::chrono::milliseconds(5000));
  CHECK(remote->settings().connect_timeout == std::chrono::milliseconds(1000));
  CHECK(remote_with("https://h/kiln?timeout_ms=700")->settings().request_timeout == std::chrono::milliseconds(700));
  CHECK(remote_with("redis://h:1/0")->settings().request_timeout == std::chrono::milliseconds(500));
}

TEST_CASE("a token sent over plain http:// is used, with one warning to use https://") {
  TempDir dir;
  const auto token = kiln::test::write_secret(dir.path() / "token", "Bearer t\n");
  auto plain = remote_with("http://h/kiln", token);
  CHECK(plain->usable());
  REQUIRE(plain->warnings().size() == 1);
  CHECK(plain->warnings()[0].find("plain http://") != std::string::npos);
  CHECK(remote_with("https://h/kiln", token)->warnings().empty());
  CHECK(remote_with("http://h/kiln")->warnings().empty());  // no credential, nothing to read
}

TEST_CASE("S3: push writes over a value that does not verify, despite write-once; an entry that does is kept") {
  TempDir dir;
  const auto credentials = kiln::test::s3_credentials(dir.path());
  const kiln::CacheKey planted = sample_key(206), good = sample_key(207);
  auto other = remote_with(s3().s3_url("kiln-cache/push"), credentials);
  REQUIRE(kiln::test::store_of(*other).put(kiln::test::entry_name(planted.hex), "planted", std::chrono::hours(1)).kind ==
          kiln::RemoteReply::done);
  const kiln::CacheEntry others = sample_entry(207, 90, 2048);  // another machine's build of the key: other bytes
  REQUIRE(other->store(good, others));
  kiln::DiskCache disk(kiln::test::config_at(dir.path() / "cache"));
  REQUIRE(disk.store(planted, sample_entry(206)));
  REQUIRE(disk.store(good, sample_entry(207)));
  auto machine = remote_with(s3().s3_url("kiln-cache/push"), credentials);
  const kiln::PushReport pushed = kiln::push(disk, *machine);
  CHECK(pushed.pushed == 2);
  CHECK(pushed.replaced == 1);
  auto reader = remote_with(s3().s3_url("kiln-cache/push"), credentials);
  const auto repaired = reader->load(planted);
  REQUIRE(repaired);
  CHECK(kiln::test::same_entry(*repaired, sample_entry(206)));
  const auto kept = reader->load(good);
  REQUIRE(kept);
  CHECK(kiln::test::same_entry(*kept, others));
}
