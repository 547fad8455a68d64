// Faults injected while a cache is in use: its directory deleted or made read-only, an entry corrupted between check and read, a real full disk, a clock that jumps.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

using kiln::test::ChildChecks;
using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

std::filesystem::path entry_path(const std::filesystem::path& root, int n) {
  return kiln::test::entry_path(root, sample_key(n));
}

void set_mtime(const std::filesystem::path& path, std::time_t when) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {when, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

std::time_t mtime_of(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_mtime : 0;
}

}  // namespace

TEST_CASE("the cache directory deleted while in use: loads miss, the next store makes it again, private") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));

  SUBCASE("the entries directory") { std::filesystem::remove_all(entries_dir(root)); }
  SUBCASE("the whole cache root") { std::filesystem::remove_all(root); }

  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK_FALSE(cache.contains(sample_key(0)));
  CHECK(cache.store(sample_key(1), sample_entry(1)));
  CHECK((std::filesystem::status(root).permissions() & std::filesystem::perms::all) == std::filesystem::perms::owner_all);
  CHECK((std::filesystem::status(entries_dir(root)).permissions() & std::filesystem::perms::all) ==
        std::filesystem::perms::owner_all);
  REQUIRE(cache.load(sample_key(1)).has_value());

  // get_or_build needs the directory for its lock file before it builds: gone again, made again.
  std::filesystem::remove_all(root);
  int builds = 0;
  const auto built = cache.get_or_build(sample_key(2), [&] {
    ++builds;
    return sample_entry(2);
  });
  CHECK(builds == 1);
  CHECK(kiln::test::same_entry(built, sample_entry(2)));
  CHECK(cache.load(sample_key(2)).has_value());
  CHECK(cache.stats().store_failures == 0);
  CHECK(cache.warnings().empty());
  CHECK(kiln::test::temp_and_lock_files(entries_dir(root)).empty());
}

TEST_CASE("the cache directory replaced, while in use, by one others can write: nothing loaded from it or written to it") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  const std::string planted = kiln::test::read_bytes(entry_path(root, 0));  // a valid entry, as an attacker could copy
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(entries_dir(root));
  std::filesystem::permissions(entries_dir(root), std::filesystem::perms::all);  // 0777: anyone could plant a binary
  kiln::test::write_bytes(entry_path(root, 0), planted);

  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK(std::filesystem::exists(entry_path(root, 0)));  // not trusted, and not kiln's to delete either
  CHECK_FALSE(cache.store(sample_key(1), sample_entry(1)));
  CHECK_FALSE(std::filesystem::exists(entry_path(root, 1)));
  REQUIRE(cache.warnings().size() == 2);  // one for loads, one for writes
  for (const auto& w : cache.warnings()) CHECK(w.find("chmod go-w " + entries_dir(root).string()) != std::string::npos);

  std::filesystem::permissions(entries_dir(root), std::filesystem::perms::owner_all);  // private again: in use again
  CHECK(cache.load(sample_key(0)).has_value());
  CHECK(cache.store(sample_key(1), sample_entry(1)));
}

TEST_CASE("the cache directory made read-only while in use: stores fail with one warning, loads go on, writable again later") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  const int status = kiln::test::run_in_child([&] {
    ChildChecks checks;
    if (!kiln::test::become_owner_of_as_nobody(tmp.path())) return 2;  // so that modes count
    kiln::DiskCache cache(kiln::test::config_at(root));
    checks.expect(cache.usable(), "usable: " + cache.unusable_reason().message);
    checks.expect(cache.store(sample_key(0), sample_entry(0)), "a store before");
    if (::chmod(entries_dir(root).c_str(), 0500) != 0) return 2;

    checks.expect(!cache.store(sample_key(1), sample_entry(1)), "a store fails");
    checks.expect(cache.load(sample_key(0)).has_value(), "a load still hits");
    int builds = 0;
    const auto built = cache.get_or_build(sample_key(2), [&] {
      ++builds;
      return sample_entry(2);
    });
    checks.expect(builds == 1 && kiln::test::same_entry(built, sample_entry(2)), "get_or_build builds without its lock");
    checks.expect(cache.warnings().size() == 1, "one warning, got " + std::to_string(cache.warnings().size()));
    checks.expect(kiln::test::temp_and_lock_files(entries_dir(root)).empty(), "no temp or lock file");

    if (::chmod(entries_dir(root).c_str(), 0700) != 0) return 2;
    checks.expect(cache.store(sample_key(3), sample_entry(3)), "writable again: a store works");
    checks.expect(cache.load(sample_key(3)).has_value(), "and loads back");
    checks.expect(cache.verify().problems.empty(), "every entry verifies");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("an entry corrupted between the existence check and the read is a counted miss, deleted, and rebuilt once") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  REQUIRE(cache.store(sample_key(1), sample_entry(1)));
  REQUIRE(cache.contains(sample_key(0)));  // what plan() does: a stat, nothing read
  const auto path = entry_path(tmp.path(), 0);
  const std::string good = kiln::test::read_bytes(path);

  SUBCASE("garbage written over it") { kiln::test::write_bytes(path, "not an entry at all"); }
  SUBCASE("cut in half") { kiln::test::write_bytes(path, good.substr(0, good.size() / 2)); }
  SUBCASE("one byte of its cubin flipped") {
    std::string bad = good;
    bad[bad.size() - 40] ^= 0x10;
    kiln::test::write_bytes(path, bad);
  }
  SUBCASE("another key's valid entry renamed over it") {
    std::filesystem::rename(entry_path(tmp.path(), 1), path);
  }

  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK(cache.stats().corrupt == 1);
  CHECK_FALSE(std::filesystem::exists(path));
  int builds = 0;
  const auto rebuilt = cache.get_or_build(sample_key(0), [&] {
    ++builds;
    return sample_entry(0);
  });
  CHECK(builds == 1);
  CHECK(kiln::test::same_entry(rebuilt, sample_entry(0)));
  CHECK(kiln::test::read_bytes(path) == good);
  CHECK(cache.verify().problems.empty());
}

TEST_CASE("a full disk (a 160 KiB tmpfs): stores fail half-way with ENOSPC, one warning, no partial file; space again, stores again") {
  kiln::test::TempDir tmp;
  const int status = kiln::test::run_in_child([&] {
    // A private mount namespace and a tiny tmpfs: a real ENOSPC, not a simulated one. Needs root
    // (CAP_SYS_ADMIN), as CI has; 77 without.
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", tmp.path().c_str(), "tmpfs", 0, "size=160k,mode=0700") != 0) return 77;
    ChildChecks checks;
    const auto root = tmp.path() / "kiln";
    kiln::DiskCache cache(kiln::test::config_at(root));
    checks.expect(cache.usable(), "usable: " + cache.unusable_reason().message);
    int stored = 0;
    for (int k = 0; k < 12; ++k) stored += cache.store(sample_key(k), sample_entry(k, 90, 40 << 10));  // ~40 KiB each
    checks.expect(stored >= 2 && stored < 12, "some stores fit and then the disk is full: " + std::to_string(stored));
    checks.expect(cache.warnings().size() == 1, "one warning, got " + std::to_string(cache.warnings().size()));
    checks.expect(!cache.warnings().empty() && cache.warnings()[0].find("No space left on device") != std::string::npos,
                  "the warning says why: " + (cache.warnings().empty() ? std::string() : cache.warnings()[0]));
    checks.expect(kiln::test::temp_and_lock_files(entries_dir(root)).empty(), "no partial temp file left");
    checks.expect(cache.verify().problems.empty(), "every stored entry verifies");
    for (int k = 0; k < stored; ++k) checks.expect(cache.load(sample_key(k)).has_value(), "entry " + std::to_string(k) + " loads");

    const auto report = cache.prune(40 << 10);  // make room
    checks.expect(report.removed > 0, "prune evicts to make room");
    checks.expect(cache.store(sample_key(20), sample_entry(20)), "a store fits again");
    checks.expect(cache.load(sample_key(20)).has_value(), "and loads back");
    return checks.exit_code();
  });
  if (status == 77) {
    MESSAGE("skipped: no private mount namespace here (needs root)");
    return;
  }
  CHECK(status == 0);
}

TEST_CASE("a clock that jumps: entries dated in the future or the distant past still verify and are evicted oldest first; a hit re-dates one") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  for (int k = 0; k < 6; ++k) REQUIRE(cache.store(sample_key(k), sample_entry(k, 90, 8 << 10)));
  const std::time_t now = std::time(nullptr);
  constexpr std::time_t kYear = 365 * 24 * 3600;
  set_mtime(entry_path(tmp.path(), 0), now + 10 * kYear);  // the clock went back after it was used
  set_mtime(entry_path(tmp.path(), 1), 1000);              // used in 1970, as a reset clock would say
  set_mtime(entry_path(tmp.path(), 2), now - kYear);

  // A hit makes an entry the most recently used by the clock as it is now, wherever its date was.
  REQUIRE(cache.load(sample_key(0)).has_value());
  CHECK(mtime_of(entry_path(tmp.path(), 0)) <= std::time(nullptr));
  CHECK(mtime_of(entry_path(tmp.path(), 0)) >= now);

  const std::uint64_t before = cache.stats().bytes;
  const auto report = cache.prune(before / 2);
  CHECK(report.bytes_after <= before / 2);
  CHECK_FALSE(cache.contains(sample_key(1)));  // the oldest dates go first
  CHECK_FALSE(cache.contains(sample_key(2)));
  CHECK(cache.contains(sample_key(0)));
  const auto verified = cache.verify();
  CHECK(verified.problems.empty());
  CHECK(verified.checked == cache.stats().entries);

  // A live writer's temp file dated in the future is still its own: kept.
  const auto live = entries_dir(tmp.path()) / (sample_key(9).hex + ".kiln.tmp." + std::to_string(::getpid()) + ".7");
  kiln::test::write_bytes(live, "a store in flight");
  set_mtime(live, now + kYear);
  CHECK(cache.prune(cache.config().max_bytes).stray_removed == 0);
  CHECK(std::filesystem::exists(live));
}
