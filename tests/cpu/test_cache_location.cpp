// Where the cache lives (environment precedence), KILN_CACHE=off, the size cap
// variable, and the refusal of directories that others could write.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

using kiln::test::ScopedEnv;

namespace {

// Every variable the configuration reads, cleared; the test then sets what it checks.
struct CleanEnv {
  ScopedEnv cache{"KILN_CACHE", std::nullopt};
  ScopedEnv dir{"KILN_CACHE_DIR", std::nullopt};
  ScopedEnv xdg{"XDG_CACHE_HOME", std::nullopt};
  ScopedEnv home{"HOME", std::nullopt};
  ScopedEnv cap{"KILN_CACHE_MAX_BYTES", std::nullopt};
  ScopedEnv lock{"KILN_CACHE_LOCK_TIMEOUT", std::nullopt};
};

}  // namespace

TEST_CASE("the directory: KILN_CACHE_DIR, else XDG_CACHE_HOME/kiln, else HOME/.cache/kiln, else the passwd home") {
  CleanEnv env;
  ScopedEnv home("HOME", "/home/someone");
  CHECK(kiln::CacheConfig::from_environment().dir == "/home/someone/.cache/kiln");
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg/cache");
    CHECK(kiln::CacheConfig::from_environment().dir == "/xdg/cache/kiln");
    ScopedEnv dir("KILN_CACHE_DIR", "/explicit/dir");
    CHECK(kiln::CacheConfig::from_environment().dir == "/explicit/dir");
  }
  {
    ScopedEnv relative_xdg("XDG_CACHE_HOME", "relative/cache");  // invalid per the XDG spec: ignored
    CHECK(kiln::CacheConfig::from_environment().dir == "/home/someone/.cache/kiln");
  }
  ScopedEnv no_home("HOME", std::nullopt);
  const auto from_passwd = kiln::CacheConfig::from_environment().dir;
  CHECK(from_passwd.filename() == "kiln");
  CHECK(from_passwd.parent_path().filename() == ".cache");
  CHECK(from_passwd.is_absolute());
}

TEST_CASE("KILN_CACHE=off disables the cache: no directory, every load a miss, every store refused") {
  CleanEnv env;
  kiln::test::TempDir tmp;
  ScopedEnv dir("KILN_CACHE_DIR", (tmp.path() / "kiln").string());
  ScopedEnv off("KILN_CACHE", "off");
  const auto config = kiln::CacheConfig::from_environment();
  CHECK_FALSE(config.enabled);
  kiln::DiskCache cache(config);
  CHECK_FALSE(cache.usable());
  CHECK(cache.unusable_reason().message.find("KILN_CACHE=off") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "kiln"));
  CHECK_FALSE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1)));
  CHECK(cache.lookup(kiln::test::sample_key(1)).miss.message.find("not in use (the disk cache is disabled (KILN_CACHE=off)") != std::string::npos);
  int builds = 0;
  cache.get_or_build(kiln::test::sample_key(1), [&] {
    ++builds;
    return kiln::test::sample_entry(1);
  });
  CHECK(builds == 1);
  CHECK(cache.warnings().empty());  // asked for, so nothing to warn about
}

TEST_CASE("KILN_CACHE_MAX_BYTES sets the cap: bytes, or a K/M/G/T suffix, 0 for none; garbage keeps the default") {
  CleanEnv env;
  CHECK(kiln::CacheConfig::from_environment().max_bytes == (std::uint64_t{1} << 30));
  const std::pair<const char*, std::uint64_t> cases[] = {
      {"0", 0}, {"12345", 12345}, {"64k", 64 << 10}, {"512M", 512ull << 20}, {"2G", 2ull << 30}, {"3GiB", 3ull << 30},
      {"1T", 1ull << 40}, {"lots", 1ull << 30}, {"12Q", 1ull << 30}, {"99999999999T", 1ull << 30}};
  for (const auto& [text, bytes] : cases) {
    CAPTURE(text);
    ScopedEnv cap("KILN_CACHE_MAX_BYTES", text);
    CHECK(kiln::CacheConfig::from_environment().max_bytes == bytes);
  }
}

TEST_CASE("KILN_CACHE: off, 0, false or no (any case) turn the cache off; anything else not a switch is one warning") {
  CleanEnv env;
  CHECK(kiln::CacheConfig::from_environment().enabled);
  for (const char* off : {"off", "OFF", "0", "false", "False", "no"}) {
    CAPTURE(off);
    ScopedEnv cache("KILN_CACHE", off);
    CHECK_FALSE(kiln::CacheConfig::from_environment().enabled);
  }
  for (const char* on : {"on", "1", "true", "YES"}) {
    CAPTURE(on);
    ScopedEnv cache("KILN_CACHE", on);
    CHECK(kiln::CacheConfig::from_environment().enabled);
  }
  kiln::test::TempDir tmp;
  const auto err = tmp.path() / "stderr";
  const int status = kiln::test::run_in_child([&] {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDERR_FILENO);
    kiln::test::set_setting("KILN_CACHE", "garbage");
    return kiln::CacheConfig::from_environment().enabled ? 0 : 1;
  });
  CHECK(status == 0);  // what it does not understand leaves the cache on
  const std::string said = kiln::test::read_bytes(err);
  CHECK(said.find("KILN_CACHE='garbage' is neither on nor off (on, 1, true, yes / off, 0, false, no)") != std::string::npos);
  CHECK(std::count(said.begin(), said.end(), '\n') == 1);
}

TEST_CASE("the default cache and the free functions follow the environment") {
  kiln::test::TempDir tmp;
  // In a child: default_cache() is built once per process, from the environment of its first use.
  const int status = kiln::test::run_in_child([&] {
    kiln::test::ChildChecks checks;
    kiln::test::set_setting("KILN_CACHE_DIR", (tmp.path() / "kiln").c_str());
    kiln::test::set_setting("KILN_CACHE", nullptr);
    checks.expect(kiln::default_cache().config().dir == tmp.path() / "kiln", "default_cache() uses KILN_CACHE_DIR");
    checks.expect(kiln::default_cache().store(kiln::test::sample_key(1), kiln::test::sample_entry(1)), "store");
    checks.expect(kiln::cache_stats().entries == 1, "cache_stats() sees the entry");
    checks.expect(kiln::verify_cache().checked == 1, "verify_cache() checks it");
    checks.expect(kiln::prune(0).removed == 1, "prune(0) evicts it");
    checks.expect(kiln::default_cache().store(kiln::test::sample_key(2), kiln::test::sample_entry(2)), "store again");
    checks.expect(kiln::clear_cache().removed == 1, "clear_cache() removes it");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("a cache directory that group or others can write is refused, once, with its name and the fix") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  { kiln::DiskCache create(kiln::test::config_at(root)); }
  for (const auto& dir : {root, kiln::test::entries_dir(root)}) {
    CAPTURE(dir);
    for (const mode_t mode : {0770, 0707, 0777}) {
      CAPTURE(mode);
      REQUIRE(::chmod(dir.c_str(), mode) == 0);
      kiln::DiskCache cache(kiln::test::config_at(root));
      CHECK_FALSE(cache.usable());
      CHECK(cache.unusable_reason().message.find("refusing " + dir.string() + ": group or others can write it") != std::string::npos);
      CHECK(cache.unusable_reason().message.find("chmod go-w " + dir.string()) != std::string::npos);
      CHECK_FALSE(cache.load(kiln::test::sample_key(1)));
      CHECK_FALSE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1)));
      CHECK_FALSE(cache.load(kiln::test::sample_key(1)));
      REQUIRE(cache.warnings().size() == 1);
      CHECK(cache.warnings()[0].find(dir.string()) != std::string::npos);
      REQUIRE(::chmod(dir.c_str(), 0700) == 0);
    }
  }
  kiln::DiskCache fixed(kiln::test::config_at(root));
  CHECK(fixed.usable());
}

TEST_CASE("a cache directory owned by another user is refused") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: only root can give a directory to another user");
    return;
  }
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  std::filesystem::create_directories(root);
  REQUIRE(::chown(root.c_str(), 65534, 65534) == 0);
  kiln::DiskCache cache(kiln::test::config_at(root));
  CHECK_FALSE(cache.usable());
  CHECK(cache.unusable_reason().message.find("refusing " + root.string() + ": it is owned by uid 65534") != std::string::npos);
}

TEST_CASE("a cache path that is not a directory is unusable, with the reason") {
  kiln::test::TempDir tmp;
  kiln::test::write_bytes(tmp.path() / "file", "x");
  kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "file"));
  CHECK_FALSE(cache.usable());
  CHECK(cache.unusable_reason().message.find((tmp.path() / "file").string()) != std::string::npos);
}

TEST_CASE("KILN_CACHE_LOCK_TIMEOUT: whole seconds, default 300; anything else keeps the default") {
  CleanEnv env;
  CHECK(kiln::CacheConfig::from_environment().lock_timeout == std::chrono::seconds(300));
  const std::pair<const char*, long> cases[] = {{"0", 0}, {"5", 5}, {"3600", 3600}, {"-1", 300}, {"abc", 300},
                                                {"5s", 300}, {"", 300}, {" 5", 300}};
  for (const auto& [text, seconds] : cases) {
    CAPTURE(text);
    kiln::test::ScopedEnv set("KILN_CACHE_LOCK_TIMEOUT", text);
    CHECK(kiln::CacheConfig::from_environment().lock_timeout == std::chrono::seconds(seconds));
  }
}
