// A read-only cache directory and a full disk: one warning, loads keep working.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using kiln::test::ChildChecks;
using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

// Makes `dir` read-only for this (child) process.
bool make_read_only(const std::filesystem::path& top, const std::filesystem::path& dir) {
  return kiln::test::become_owner_of_as_nobody(top) && ::chmod(dir.c_str(), 0500) == 0;
}

}  // namespace

TEST_CASE("a read-only cache directory still serves loads; stores fail with one warning") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  {
    kiln::DiskCache cache(kiln::test::config_at(root));
    REQUIRE(cache.store(sample_key(0), sample_entry(0)));
    REQUIRE(cache.store(sample_key(1), sample_entry(1)));
  }
  const int status = kiln::test::run_in_child([&] {
    ChildChecks checks;
    if (!make_read_only(tmp.path(), entries_dir(root))) return 2;
    kiln::DiskCache cache(kiln::test::config_at(root));
    checks.expect(cache.usable(), "a read-only directory is usable for loads: " + cache.unusable_reason().message);
    checks.expect(cache.load(sample_key(0)).has_value(), "load of an existing entry");
    checks.expect(!cache.store(sample_key(2), sample_entry(2)), "store fails");
    checks.expect(!cache.store(sample_key(3), sample_entry(3)), "store fails again");
    int builds = 0;
    const auto built = cache.get_or_build(sample_key(4), [&] {
      ++builds;
      return sample_entry(4);
    });
    checks.expect(builds == 1 && kiln::test::same_entry(built, sample_entry(4)), "get_or_build builds without the lock");
    checks.expect(cache.load(sample_key(1)).has_value(), "load still works after failed stores");
    checks.expect(cache.warnings().size() == 1, "one warning, got " + std::to_string(cache.warnings().size()));
    checks.expect(!cache.warnings().empty() && cache.warnings()[0].find(entries_dir(root).string()) != std::string::npos,
                  "the warning names the directory");
    checks.expect(cache.stats().store_failures == 3, "failures counted");
    checks.expect(kiln::test::temp_and_lock_files(entries_dir(root)).empty(), "no temp or lock file");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("a full disk (RLIMIT_FSIZE): stores fail with one warning and leave no temp file; loads still work") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  {
    kiln::DiskCache cache(kiln::test::config_at(root));
    REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  }
  const int status = kiln::test::run_in_child([&] {
    ChildChecks checks;
    // Past the limit write() fails with EFBIG instead of raising SIGXFSZ, which would kill the process.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 << 10, 64 << 10};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    kiln::DiskCache cache(kiln::test::config_at(root));
    checks.expect(!cache.store(sample_key(1), sample_entry(1, 90, 1 << 20)), "a 1 MiB store fails");
    checks.expect(!cache.store(sample_key(2), sample_entry(2, 90, 1 << 20)), "another one fails");
    checks.expect(cache.warnings().size() == 1, "one warning, got " + std::to_string(cache.warnings().size()));
    checks.expect(!cache.warnings().empty() && cache.warnings()[0].find("File too large") != std::string::npos,
                  "the warning says why: " + (cache.warnings().empty() ? std::string() : cache.warnings()[0]));
    checks.expect(cache.stats().store_failures == 2, "failures counted");
    checks.expect(kiln::test::files_in(entries_dir(root)).size() == 1, "no temp file left, the old entry kept");
    checks.expect(cache.load(sample_key(0)).has_value(), "load of an existing entry");
    checks.expect(cache.store(sample_key(3), sample_entry(3)), "a small store still fits");
    return checks.exit_code();
  });
  CHECK(status == 0);
}
