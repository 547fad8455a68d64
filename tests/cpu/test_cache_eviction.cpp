// The size cap: least recently used entries go first, a load refreshes an
// entry, and prune also sweeps files that dead processes left behind.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

// mtimes must differ between steps even on file systems with coarse timestamps.
void tick() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

std::uint64_t entry_size(const std::filesystem::path& root, int n) {
  return std::filesystem::file_size(entries_dir(root) / (sample_key(n).hex + ".kiln"));
}

void age(const std::filesystem::path& path, std::chrono::seconds by) {
  const std::filesystem::file_time_type now = std::filesystem::file_time_type::clock::now();
  std::filesystem::last_write_time(path, now - by);
}

}  // namespace

TEST_CASE("over the cap, the least recently used entries are evicted; a load counts as a use") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path();
  // Probe one entry's size (all sample entries of equal code size have nearly the same size).
  std::uint64_t size = 0;
  {
    kiln::DiskCache probe(kiln::test::config_at(root));
    REQUIRE(probe.store(sample_key(0), sample_entry(0, 90, 8192)));
    size = entry_size(root, 0);
    probe.clear();
  }
  // Room for five entries, not six.
  kiln::DiskCache cache(kiln::test::config_at(root, 5 * size + size / 2));
  for (int i = 0; i < 5; ++i) {
    REQUIRE(cache.store(sample_key(i), sample_entry(i, 90, 8192)));
    tick();
  }
  CHECK(cache.stats().entries == 5);
  REQUIRE(cache.load(sample_key(0)));  // 0 is now the most recently used; 1 the least
  tick();
  REQUIRE(cache.store(sample_key(5), sample_entry(5, 90, 8192)));
  CHECK_FALSE(cache.contains(sample_key(1)));
  for (int i : {0, 2, 3, 4, 5}) CHECK(cache.contains(sample_key(i)));
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().bytes <= cache.config().max_bytes);

  tick();
  REQUIRE(cache.load(sample_key(2)));
  const auto report = cache.prune(2 * size + size / 2);
  CHECK(report.removed == 3);
  CHECK(report.bytes_after <= 2 * size + size / 2);
  CHECK(report.bytes_before > report.bytes_after);
  CHECK(cache.contains(sample_key(5)));  // stored last
  CHECK(cache.contains(sample_key(2)));  // loaded last
  CHECK(cache.stats().evictions == 4);
  CHECK(cache.prune(0).removed == 2);
  CHECK(cache.stats().entries == 0);
}

TEST_CASE("prune removes temp files of dead or long-gone writers and unheld lock files, and keeps the rest") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  const auto dir = entries_dir(tmp.path());
  const std::string hex = sample_key(0).hex;
  const pid_t dead = [] {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
  }();
  const std::string mine = std::to_string(::getpid());
  kiln::test::write_bytes(dir / (hex + ".kiln.tmp." + std::to_string(dead) + ".1"), "dead writer");
  kiln::test::write_bytes(dir / (hex + ".kiln.tmp." + mine + ".2"), "live writer, just started");
  kiln::test::write_bytes(dir / (hex + ".kiln.tmp." + mine + ".3"), "live pid, but two hours old");
  age(dir / (hex + ".kiln.tmp." + mine + ".3"), std::chrono::hours(2));
  kiln::test::write_bytes(dir / (hex + ".lock"), "");  // its holder died before deleting it
  kiln::test::write_bytes(dir / "notes.txt", "not kiln's");

  const auto report = cache.prune(cache.config().max_bytes);
  CHECK(report.stray_removed == 3);
  CHECK(kiln::test::files_in(dir) == std::vector<std::string>{hex + ".kiln.tmp." + mine + ".2", "notes.txt"});
}

TEST_CASE("a cap of 0 is no cap; an entry larger than the cap is not stored, and the store says so") {
  kiln::test::TempDir tmp;
  {
    kiln::DiskCache unlimited(kiln::test::config_at(tmp.path(), 0));
    for (int i = 0; i < 5; ++i) REQUIRE(unlimited.store(kiln::test::sample_key(i), kiln::test::sample_entry(i, 90, 64 << 10)));
    CHECK(unlimited.stats().entries == 5);
    CHECK(unlimited.stats().evictions == 0);
  }
  kiln::DiskCache tiny(kiln::test::config_at(tmp.path(), 100));
  CHECK_FALSE(tiny.store(kiln::test::sample_key(9), kiln::test::sample_entry(9)));
  CHECK_FALSE(tiny.load(kiln::test::sample_key(9)).has_value());
  REQUIRE(tiny.warnings().size() == 1);
  CHECK(tiny.warnings()[0].find("larger than the cache's cap of 100 bytes") != std::string::npos);
  CHECK(tiny.stats().entries == 5);  // nothing evicted for an entry that was not stored
}

TEST_CASE("the entry a store publishes is kept by the prune after it, even when older ones are dated in the future") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path();
  std::uintmax_t size = 0;
  {
    kiln::DiskCache first(kiln::test::config_at(root));
    REQUIRE(first.store(kiln::test::sample_key(0), kiln::test::sample_entry(0, 90, 4096)));
    const auto path = kiln::test::entries_dir(root) / (kiln::test::sample_key(0).hex + ".kiln");
    size = std::filesystem::file_size(path);
    const struct timespec future[2] = {{0, UTIME_OMIT}, {std::time(nullptr) + 86400, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), future, AT_SYMLINK_NOFOLLOW) == 0);
  }
  kiln::DiskCache cache(kiln::test::config_at(root, size + size / 2));  // room for one entry
  REQUIRE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1, 90, 4096)));
  CHECK(cache.load(kiln::test::sample_key(1)).has_value());
  CHECK_FALSE(cache.load(kiln::test::sample_key(0)).has_value());
}
