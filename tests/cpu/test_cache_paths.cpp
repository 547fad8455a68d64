// Paths an attacker or a careless user could bend: a parent directory others can write, a version
// directory swapped for a symlink, entry files with the wrong owner or mode, and directories at names kiln
// uses (which hold the user's files, and are never deleted).
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

bool any_warning_contains(const kiln::DiskCache& cache, std::string_view text) {
  for (const auto& w : cache.warnings())
    if (w.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a cache under a parent others can write without the sticky bit is refused, and nothing is made in it") {
  kiln::test::TempDir tmp;
  const auto shared = tmp.path() / "shared";
  std::filesystem::create_directories(shared);
  REQUIRE(::chmod(shared.c_str(), 0777) == 0);  // another user could swap the cache directory for theirs
  const auto root = shared / "kiln";

  kiln::DiskCache cache(kiln::test::config_at(root));
  CHECK_FALSE(cache.usable());
  CHECK(cache.unusable_reason().message.find("refusing " + shared.string()) != std::string::npos);
  CHECK(cache.unusable_reason().message.find("sticky") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(root));  // refused before anything was made inside
  CHECK_FALSE(cache.store(sample_key(1), sample_entry(1)));
  CHECK_FALSE(std::filesystem::exists(root));

  // With the sticky bit (as /tmp), others cannot rename or delete what is ours: fine.
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  kiln::DiskCache sticky(kiln::test::config_at(root));
  CHECK(sticky.usable());
  CHECK(sticky.store(sample_key(1), sample_entry(1)));
}

TEST_CASE("a refused cache directory gets no version directory made inside it") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  std::filesystem::create_directories(root);
  REQUIRE(::chmod(root.c_str(), 0777) == 0);
  kiln::DiskCache cache(kiln::test::config_at(root));
  CHECK_FALSE(cache.usable());
  CHECK(cache.unusable_reason().message.find("refusing " + root.string()) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(entries_dir(root)));
  CHECK_FALSE(cache.store(sample_key(1), sample_entry(1)));
  CHECK_FALSE(std::filesystem::exists(entries_dir(root)));
}

TEST_CASE("the version directory swapped for a symlink to a private directory is not followed") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  // The same entries, private, elsewhere; following the link would give a hit.
  const auto elsewhere = tmp.path() / "elsewhere";
  std::filesystem::rename(entries_dir(root), elsewhere);
  std::filesystem::create_directory_symlink(elsewhere, entries_dir(root));

  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK_FALSE(cache.contains(sample_key(0)));
  CHECK_FALSE(cache.store(sample_key(1), sample_entry(1)));
  CHECK_FALSE(std::filesystem::exists(elsewhere / (sample_key(1).hex + ".kiln")));
  CHECK(any_warning_contains(cache, "symlink"));
  CHECK(std::filesystem::exists(elsewhere / (sample_key(0).hex + ".kiln")));  // nothing of it deleted
}

TEST_CASE("an entry file that group or others can write is not loaded") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  REQUIRE(::chmod(kiln::test::entry_path(tmp.path(), sample_key(0)).c_str(), 0666) == 0);
  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK(any_warning_contains(cache, "group or others can write it"));
  CHECK(cache.store(sample_key(0), sample_entry(0)));  // a new one replaces it
  CHECK(cache.load(sample_key(0)).has_value());
}

TEST_CASE("an entry file owned by another user is not loaded, and not deleted") {
  if (::geteuid() != 0) {
    MESSAGE("skipped: only root can give a file to another user");
    return;
  }
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.store(sample_key(0), sample_entry(0)));
  REQUIRE(::chown(kiln::test::entry_path(tmp.path(), sample_key(0)).c_str(), 65534, 65534) == 0);
  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK(any_warning_contains(cache, "owned by uid 65534"));
  CHECK(std::filesystem::exists(kiln::test::entry_path(tmp.path(), sample_key(0))));
}

TEST_CASE("a directory at an entry's or a temp file's name, holding a user's file, is never deleted") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.store(sample_key(9), sample_entry(9)));
  const auto dir = entries_dir(tmp.path());
  const auto at_entry = kiln::test::entry_path(tmp.path(), sample_key(0));
  // A temp file's name whose writer is long gone (pid 1 is alive, so make it an hour old).
  const auto at_temp = dir / (sample_key(1).hex + ".kiln.tmp.999999999.abc");
  for (const auto& d : {at_entry, at_temp}) {
    std::filesystem::create_directories(d);
    kiln::test::write_bytes(d / "thesis.tex", "a user's work");
    const struct timespec old[2] = {{0, UTIME_OMIT}, {std::time(nullptr) - 7200, 0}};
    REQUIRE(::utimensat(AT_FDCWD, d.c_str(), old, AT_SYMLINK_NOFOLLOW) == 0);
  }
  CHECK_FALSE(cache.load(sample_key(0)).has_value());
  CHECK(any_warning_contains(cache, at_entry.string()));
  cache.verify();
  cache.prune(0);
  cache.clear();
  for (const auto& d : {at_entry, at_temp}) {
    CAPTURE(d);
    CHECK(kiln::test::read_bytes(d / "thesis.tex") == "a user's work");
  }
  CHECK_FALSE(std::filesystem::exists(kiln::test::entry_path(tmp.path(), sample_key(9))));  // kiln's own entry did go
}
