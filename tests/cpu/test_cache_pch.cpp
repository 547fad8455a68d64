// The precompiled headers the JIT pool keeps beside the entries (<family>.pch and its .sum): counted in
// the cache's bytes and cap, evicted by age with their sums, checked by verify, removed by clear.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "disk/files.hpp"
#include "base/summed_file.hpp"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>

using kiln::test::entries_dir;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

namespace fs = std::filesystem;

// A PCH file of `size` bytes published as the worker does (temp file, sum, rename), dated `age` ago.
fs::path plant_pch(const fs::path& entries, const std::string& family, std::size_t size, std::chrono::hours age) {
  const fs::path path = entries / (family + ".pch");
  const fs::path temp = kiln::detail::summed_temp_path(path);
  kiln::test::write_bytes(temp, kiln::test::noise(size, size));
  REQUIRE(kiln::detail::publish_summed(temp, path).ok());
  const auto when = fs::file_time_type::clock::now() - age;
  fs::last_write_time(path, when);
  fs::last_write_time(kiln::detail::sum_path(path), when);
  return path;
}

std::uint64_t size_of(const fs::path& p) { return fs::file_size(p); }

// A cache with two entries, an old 64 KiB PCH and a new 32 KiB one.
struct CacheWithPch {
  kiln::test::TempDir tmp;
  fs::path root = tmp.path() / "kiln";
  kiln::DiskCache cache{kiln::test::config_at(root)};
  fs::path entries = entries_dir(root);
  fs::path old_pch, new_pch;

  CacheWithPch() {
    REQUIRE(cache.store(sample_key(1), sample_entry(1)));
    REQUIRE(cache.store(sample_key(2), sample_entry(2)));
    old_pch = plant_pch(entries, "old", 64 << 10, std::chrono::hours(48));
    new_pch = plant_pch(entries, "new", 32 << 10, std::chrono::hours(0));
  }

  std::uint64_t bytes() const {
    std::uint64_t total = 0;
    for (const auto& e : fs::directory_iterator(entries)) {
      const auto name = e.path().filename().string();
      if (name.ends_with(".kiln") || name.ends_with(".pch") || name.ends_with(".pch.sum")) total += size_of(e.path());
    }
    return total;
  }
};

}  // namespace

TEST_CASE("PCH names are classified: the file, its sum, and temp files of either") {
  using kiln::detail::CacheFileKind;
  using kiln::detail::classify_cache_file;
  CHECK(classify_cache_file("ab12.pch").kind == CacheFileKind::pch);
  CHECK(classify_cache_file("ab12.pch").stem == "ab12");
  CHECK(classify_cache_file("ab12.pch.sum").kind == CacheFileKind::pch_sum);
  CHECK(classify_cache_file("ab12.pch.sum").stem == "ab12");
  const auto temp = classify_cache_file("ab12.pch.tmp.4321.9f");
  CHECK(temp.kind == CacheFileKind::temp);
  CHECK(temp.stem == "ab12");
  CHECK(temp.writer == 4321);
  CHECK(classify_cache_file("ab12.pch.sum.tmp.77.1").kind == CacheFileKind::temp);
  CHECK(classify_cache_file("ab12.kiln.tmp.77.1").kind == CacheFileKind::temp);
  // Not kiln's: a stray name with ".tmp." but no known kind before it, a bad pid, a bare suffix.
  CHECK(classify_cache_file("notes.tmp.77.1").kind == CacheFileKind::other);
  CHECK(classify_cache_file("ab12.pch.tmp.x.1").kind == CacheFileKind::other);
  CHECK(classify_cache_file(".pch").kind == CacheFileKind::other);
  CHECK(classify_cache_file("ab12.pch.bak").kind == CacheFileKind::other);
}

TEST_CASE("stats count PCH files and their sums in the cache's bytes") {
  CacheWithPch c;
  const kiln::CacheStats s = c.cache.stats();
  CHECK(s.entries == 2);
  CHECK(s.pch_files == 2);
  CHECK(s.bytes == c.bytes());
  CHECK(s.bytes > (96u << 10));
}

TEST_CASE("prune evicts PCH files first, the least recently used first, each with its sum") {
  CacheWithPch c;
  const std::uint64_t before = c.bytes();
  // Room for all but the old PCH: it is the oldest file, so it alone goes.
  const std::uint64_t old_bytes = size_of(c.old_pch) + size_of(kiln::detail::sum_path(c.old_pch));
  const kiln::PruneReport r = c.cache.prune(before - old_bytes);
  CHECK(r.bytes_before == before);
  CHECK(r.bytes_after == before - old_bytes);
  CHECK(r.pch_removed == 1);
  CHECK(r.removed == 0);
  CHECK_FALSE(fs::exists(c.old_pch));
  CHECK_FALSE(fs::exists(kiln::detail::sum_path(c.old_pch)));
  CHECK(fs::exists(c.new_pch));
  CHECK(c.cache.stats().bytes == c.bytes());
}

TEST_CASE("a store keeps the cache under its cap counting PCH files: an old PCH makes room for a new entry") {
  kiln::test::TempDir tmp;
  const fs::path root = tmp.path() / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root, 80 << 10));
  REQUIRE(cache.usable());
  const fs::path pch = plant_pch(entries_dir(root), "big", 78 << 10, std::chrono::hours(24));
  REQUIRE(cache.store(sample_key(3), sample_entry(3, 90, 4096)));
  CHECK_FALSE(fs::exists(pch));
  CHECK_FALSE(fs::exists(kiln::detail::sum_path(pch)));
  CHECK(cache.load(sample_key(3)));
  CHECK(cache.stats().bytes <= (80u << 10));
}

TEST_CASE("an entry is never evicted to make room for a PCH: a newer PCH that does not fit beside the entries goes first") {
  // Eviction by age alone evicted the entries stored before a PCH was built (a 150M cap, 10 units and a
  // ~200 MB PCH left 4 of them), while precompile said all were cached.
  kiln::test::TempDir tmp;
  const fs::path root = tmp.path() / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root, 80 << 10));
  REQUIRE(cache.usable());
  REQUIRE(cache.store(sample_key(1), sample_entry(1, 90, 4096)));
  const auto older = fs::file_time_type::clock::now() - std::chrono::hours(1);
  fs::last_write_time(entries_dir(root) / (sample_key(1).hex + ".kiln"), older);
  const fs::path pch = plant_pch(entries_dir(root), "fresh", 75 << 10, std::chrono::hours(0));
  REQUIRE(cache.store(sample_key(2), sample_entry(2, 90, 4096)));
  CHECK(cache.load(sample_key(1)));
  CHECK(cache.load(sample_key(2)));
  CHECK_FALSE(fs::exists(pch));
  CHECK_FALSE(fs::exists(kiln::detail::sum_path(pch)));
  CHECK(cache.stats().bytes <= (80u << 10));
}

TEST_CASE("a PCH's sum is 0600 like every file of the cache, and verify reports a file others may read or write") {
  CacheWithPch c;
  struct stat st {};
  REQUIRE(::stat(kiln::detail::sum_path(c.new_pch).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat(c.new_pch.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(c.cache.verify().failures.empty());
  ::chmod(c.new_pch.c_str(), 0644);
  const kiln::VerifyReport r = c.cache.verify();
  REQUIRE(r.failures.size() == 1);
  CHECK(r.failures[0].find(c.new_pch.filename().string()) != std::string::npos);
  CHECK(r.failures[0].find("0644") != std::string::npos);
}

TEST_CASE("verify checks every PCH file against its sum: an altered one goes with its sum, a good one stays") {
  CacheWithPch c;
  std::string bytes = kiln::test::read_bytes(c.old_pch);
  bytes[bytes.size() / 2] ^= 0x5a;
  kiln::test::write_bytes(c.old_pch, bytes);
  const kiln::VerifyReport r = c.cache.verify();
  CHECK(r.checked == 4);  // two entries, two PCH files
  CHECK(r.removed == 1);
  REQUIRE(r.problems.size() == 1);
  CHECK(r.problems[0].find("SHA-256 differs") != std::string::npos);
  CHECK_FALSE(fs::exists(c.old_pch));
  CHECK_FALSE(fs::exists(kiln::detail::sum_path(c.old_pch)));
  CHECK(fs::exists(c.new_pch));
  CHECK(kiln::detail::verify_summed(c.new_pch).ok());
}

TEST_CASE("strays: a PCH without its sum, an old sum without its PCH and a dead writer's PCH temp file are removed") {
  CacheWithPch c;
  fs::remove(kiln::detail::sum_path(c.new_pch));  // a deletion cut short
  fs::remove(c.old_pch);                          // ... and the other way round, long ago
  const fs::path young_sum = kiln::detail::sum_path(c.entries / "publishing.pch");
  kiln::test::write_bytes(young_sum, "0 0\n");  // a sum whose file is still being renamed into place
  const fs::path dead_temp = c.entries / "gone.pch.tmp.999999999.1";
  kiln::test::write_bytes(dead_temp, "half a PCH");
  const kiln::PruneReport r = c.cache.prune(std::uint64_t{1} << 40);
  CHECK(r.stray_removed == 3);
  CHECK_FALSE(fs::exists(c.new_pch));
  CHECK_FALSE(fs::exists(kiln::detail::sum_path(c.old_pch)));
  CHECK_FALSE(fs::exists(dead_temp));
  CHECK(fs::exists(young_sum));
  CHECK(c.cache.stats().entries == 2);
}

TEST_CASE("clear removes PCH files and their sums with the entries") {
  CacheWithPch c;
  CHECK(c.cache.clear().removed == 2);
  CHECK(kiln::test::files_in(c.entries, ".kiln").empty());
  CHECK(kiln::test::files_in(c.entries, ".pch").empty());
  CHECK(kiln::test::files_in(c.entries, ".sum").empty());
  CHECK(c.cache.stats().bytes == 0);
}
