// The remote tier's configuration: the Redis URL and its settings, the fleet key, what is refused and why.
#include <kiln/remote.hpp>
#include <doctest/doctest.h>

#include "remote/config.hpp"
#include "remote_test_util.hpp"

#include <sys/stat.h>

using kiln::detail::parse_redis_url;
using kiln::test::ScopedEnv;

TEST_CASE("the remote URL: host, port, database, user and password, settings") {
  kiln::RemoteSettings s;
  auto a = parse_redis_url("redis://cache.example:6380/3", s);
  REQUIRE(a);
  CHECK(a->host == "cache.example");
  CHECK(a->port == 6380);
  CHECK(a->db == 3);
  CHECK(a->password.empty());
  CHECK(a->where() == "redis://cache.example:6380/3");

  a = parse_redis_url("redis://10.0.0.5", s);
  REQUIRE(a);
  CHECK(a->port == 6379);
  CHECK(a->db == 0);

  a = parse_redis_url("redis://ci:p%40ss%2Fw0rd@[::1]:7000/", s);
  REQUIRE(a);
  CHECK(a->user == "ci");
  CHECK(a->password == "p@ss/w0rd");
  CHECK(a->host == "::1");
  CHECK(a->where() == "redis://[::1]:7000/0");
  a = parse_redis_url("redis://:secret@h", s);
  REQUIRE(a);
  CHECK(a->user.empty());
  CHECK(a->password == "secret");

  a = parse_redis_url("redis://h/1?mode=ro&connect_timeout_ms=50&timeout_ms=70&ttl_s=60&max_bytes=1000&lease_ms=900&"
                      "wait_ms=5000&retry_ms=100",
                      s);
  REQUIRE(a);
  CHECK(s.read_only);
  CHECK(s.connect_timeout.count() == 50);
  CHECK(s.request_timeout.count() == 70);
  CHECK(s.ttl.count() == 60);
  CHECK(s.max_value_bytes == 1000);
  CHECK(s.lease_ttl.count() == 900);
  CHECK(s.lease_wait.count() == 5000);
  CHECK(s.retry_after.count() == 100);
}

TEST_CASE("a bad remote URL is refused with what is wrong, and never shows the password") {
  const auto refused = [](std::string_view url) {
    kiln::RemoteSettings s;
    const auto a = parse_redis_url(url, s);
    REQUIRE_FALSE(a);
    CHECK(a.error().find("expected redis://") != std::string::npos);
    CHECK(a.error().find("hunter2") == std::string::npos);
    return a.error();
  };
  CHECK(refused("rediss://h:6380").find("TLS") != std::string::npos);
  CHECK(refused("http://h").find("scheme") != std::string::npos);
  CHECK(refused("redis://").find("no host") != std::string::npos);
  CHECK(refused("redis://:hunter2@h:0").find("port '0'") != std::string::npos);
  CHECK(refused("redis://h:70000").find("port") != std::string::npos);
  CHECK(refused("redis://h:x").find("port") != std::string::npos);
  CHECK(refused("redis://h/x").find("database 'x'") != std::string::npos);
  CHECK(refused("redis://h?mode=fast").find("mode=fast") != std::string::npos);
  CHECK(refused("redis://h?timeout=5").find("unknown setting 'timeout'") != std::string::npos);
  // Unknown before anything else is said of its value, with the names that are known.
  const std::string unknown = refused("redis://h?foo=bar");
  CHECK(unknown.find("unknown setting 'foo' (known: mode, connect_timeout_ms, timeout_ms, ttl_s, max_bytes, lease_ms, "
                     "wait_ms, retry_ms)") != std::string::npos);
  CHECK(unknown.find("positive whole number") == std::string::npos);
  CHECK(refused("redis://h?timeout_ms").find("no '=value'") != std::string::npos);
  CHECK(refused("redis://h?timeout_ms=-1").find("not a positive whole number") != std::string::npos);
  CHECK(refused("redis://user:hunter%2@h").find("'%'") != std::string::npos);
  CHECK(refused("redis://[::1:6379").find("']'") != std::string::npos);
}

TEST_CASE("the remote tier is off by default, and off with one warning when misconfigured") {
  SUBCASE("unset: off, no warning") {
    const ScopedEnv url("KILN_REMOTE_CACHE", std::nullopt);
    kiln::RemoteCache remote(kiln::RemoteConfig::from_environment());
    CHECK_FALSE(remote.usable());
    CHECK(remote.unusable_reason().message.find("off") != std::string::npos);
    CHECK(remote.warnings().empty());
  }
  SUBCASE("a switch that says off: off, no warning") {
    for (const char* off : {"off", "0", "false", "No"}) {
      CAPTURE(off);
      kiln::RemoteCache remote(kiln::test::remote_config(off));
      CHECK_FALSE(remote.usable());
      CHECK(remote.warnings().empty());
    }
  }
  SUBCASE("a bad URL") {
    kiln::RemoteCache remote(kiln::test::remote_config("redis://h:99999"));
    CHECK_FALSE(remote.usable());
    REQUIRE(remote.warnings().size() == 1);
    CHECK(remote.warnings()[0].find("port") != std::string::npos);
  }
  SUBCASE("no fleet key: nothing could be verified") {
    kiln::RemoteCache remote(kiln::test::remote_config("redis://127.0.0.1:1", ""));
    CHECK_FALSE(remote.usable());
    REQUIRE(remote.warnings().size() == 1);
    CHECK(remote.warnings()[0].find("no fleet key") != std::string::npos);
    CHECK(remote.warnings()[0].find("KILN_REMOTE_KEY_FILE") != std::string::npos);
  }
  SUBCASE("a key too short to be one") {
    kiln::RemoteCache remote(kiln::test::remote_config("redis://127.0.0.1:1", "short"));
    CHECK_FALSE(remote.usable());
    CHECK(remote.unusable_reason().message.find("at least 16") != std::string::npos);
  }
}

TEST_CASE("the fleet key from the environment: the variable, or a file that only its owner can write") {
  kiln::test::TempDir tmp;
  const auto file = tmp.path() / "fleet.key";
  kiln::test::write_bytes(file, kiln::test::kFleetKey + "\n");
  ::chmod(file.c_str(), 0600);
  const ScopedEnv url("KILN_REMOTE_CACHE", "redis://127.0.0.1:1/0");
  const ScopedEnv key("KILN_REMOTE_KEY", std::nullopt);
  const ScopedEnv key_file("KILN_REMOTE_KEY_FILE", file.string());
  const kiln::RemoteConfig config = kiln::RemoteConfig::from_environment();
  CHECK(config.url == "redis://127.0.0.1:1/0");
  CHECK(config.fleet_key_file == file);
  kiln::RemoteCache from_file(config);
  REQUIRE(from_file.usable());
  CHECK(from_file.warnings().empty());
  // The file's trailing newline is not part of the key: the same key as the variable's.
  kiln::RemoteCache from_variable(kiln::test::remote_config("redis://127.0.0.1:1/0"));
  CHECK(from_file.fleet_key_id() == from_variable.fleet_key_id());

  SUBCASE("a key file others can write is refused") {
    ::chmod(file.c_str(), 0620);
    kiln::RemoteCache refused(kiln::RemoteConfig::from_environment());
    CHECK_FALSE(refused.usable());
    CHECK(refused.unusable_reason().message.find(file.string()) != std::string::npos);
    CHECK(refused.unusable_reason().message.find("chmod 600") != std::string::npos);
  }
  SUBCASE("a key file others can read is used, with one warning saying chmod 600") {
    ::chmod(file.c_str(), 0644);
    kiln::RemoteCache readable(kiln::RemoteConfig::from_environment());
    CHECK(readable.usable());
    REQUIRE(readable.warnings().size() == 1);
    CHECK(readable.warnings()[0].find("readable by group or others") != std::string::npos);
    CHECK(readable.warnings()[0].find("chmod 600 " + file.string()) != std::string::npos);
  }
  SUBCASE("a key file in a directory others can write, without the sticky bit, is used with one warning") {
    // Whoever can rename entries there can put their own key in place of this one.
    ::chmod(tmp.path().c_str(), 0777);
    kiln::RemoteCache loose(kiln::RemoteConfig::from_environment());
    ::chmod(tmp.path().c_str(), 01777);  // sticky, as /tmp: only the file's owner may rename it
    kiln::RemoteCache sticky(kiln::RemoteConfig::from_environment());
    ::chmod(tmp.path().c_str(), 0700);
    CHECK(loose.usable());
    REQUIRE(loose.warnings().size() == 1);
    CHECK(loose.warnings()[0].find("the fleet key file " + file.string()) != std::string::npos);
    CHECK(loose.warnings()[0].find("its directory " + tmp.path().string() +
                                   " can be written by group or others and has no sticky bit (mode 0777)") != std::string::npos);
    CHECK(sticky.usable());
    CHECK(sticky.warnings().empty());
  }
  SUBCASE("a missing key file is named") {
    const ScopedEnv missing("KILN_REMOTE_KEY_FILE", (tmp.path() / "nope").string());
    kiln::RemoteCache refused(kiln::RemoteConfig::from_environment());
    CHECK_FALSE(refused.usable());
    CHECK(refused.unusable_reason().message.find("nope") != std::string::npos);
  }
  SUBCASE("the variable wins over the file") {
    const ScopedEnv variable("KILN_REMOTE_KEY", "another key of enough bytes");
    kiln::RemoteCache remote(kiln::RemoteConfig::from_environment());
    REQUIRE(remote.usable());
    CHECK(remote.fleet_key_id() != from_file.fleet_key_id());
  }
}
