// DiskCache on a directory: round trip, damaged files as counted misses, verify, clear.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <thread>

using kiln::test::entries_dir;
using kiln::test::mode_of;
using kiln::test::sample_entry;
using kiln::test::sample_key;

namespace {

// A cache under a fresh temp dir holding entry 1, whose file the test then damages.
struct OneEntry {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache{kiln::test::config_at(tmp.path() / "kiln")};
  kiln::CacheKey key = sample_key(1);
  std::filesystem::path file = entries_dir(tmp.path() / "kiln") / (key.hex + ".kiln");

  OneEntry() { REQUIRE(cache.store(key, sample_entry(1))); }

  // The damaged entry must be a miss, deleted and counted, with the reason in the warning.
  void expect_rejected(std::string_view reason) {
    const auto before = cache.stats().corrupt;
    const kiln::CacheLookup found = cache.lookup(key);
    CHECK_FALSE(found);
    CHECK(found.miss.message.rfind("corrupt: ", 0) == 0);
    CHECK(cache.stats().corrupt == before + 1);
    std::error_code ignored;
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(file, ignored)));
    REQUIRE_FALSE(cache.warnings().empty());
    CHECK(cache.warnings().back().find(reason) != std::string::npos);
  }
};

}  // namespace

TEST_CASE("a stored entry loads back, from a private directory, with nothing else left behind") {
  kiln::test::TempDir tmp;
  const auto root = tmp.path() / "a" / "kiln";
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE_MESSAGE(cache.usable(), cache.unusable_reason().message);
  CHECK(mode_of(tmp.path() / "a") == 0700);
  CHECK(mode_of(root) == 0700);
  CHECK(mode_of(entries_dir(root)) == 0700);

  const auto key = sample_key(7);
  CHECK_FALSE(cache.contains(key));
  const kiln::CacheLookup absent = cache.lookup(key);
  CHECK(absent.miss.message == "absent");
  CHECK(absent.miss.code == kiln::Errc::cache);
  CHECK(cache.store(key, sample_entry(7)));
  CHECK(cache.contains(key));
  const kiln::CacheLookup loaded = cache.lookup(key);
  REQUIRE(loaded);
  CHECK(loaded.miss.message.empty());
  CHECK(kiln::test::same_entry(*loaded.entry, sample_entry(7)));
  CHECK(kiln::test::files_in(entries_dir(root)) == std::vector<std::string>{key.hex + ".kiln"});
  CHECK(mode_of(entries_dir(root) / (key.hex + ".kiln")) == 0600);

  const auto s = cache.stats();
  CHECK(s.entries == 1);
  CHECK(s.bytes == std::filesystem::file_size(entries_dir(root) / (key.hex + ".kiln")));
  CHECK(s.hits == 1);
  CHECK(s.misses == 1);
  CHECK(s.stores == 1);
  CHECK(s.corrupt == 0);
  CHECK(cache.warnings().empty());
  // Another object on the same directory (another process, in effect) sees it too.
  kiln::DiskCache other(kiln::test::config_at(root));
  CHECK(other.load(key));
}

TEST_CASE("truncated entry files on disk are misses: deleted and counted") {
  for (const std::size_t keep : {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{100}}) {
    CAPTURE(keep);
    OneEntry t;
    const std::string bytes = kiln::test::read_bytes(t.file);
    kiln::test::write_bytes(t.file, bytes.substr(0, keep));
    t.expect_rejected(keep < 64 ? "truncated header" : "truncated: ");
  }
  OneEntry t;
  const std::string bytes = kiln::test::read_bytes(t.file);
  kiln::test::write_bytes(t.file, bytes.substr(0, bytes.size() - 1));
  t.expect_rejected("truncated: ");
}

TEST_CASE("a bit flip in each region of an entry file is a counted, deleted miss") {
  struct Flip {
    const char* region;
    std::size_t offset;  // from the start of the region
    const char* reason;
  };
  const std::size_t key_size = sample_key(1).text.size();
  for (const Flip& f : {Flip{"header", 9, "format version"}, Flip{"key text", 64 + 3, "key mismatch"},
                        Flip{"frame", 64 + key_size + 40, "frame checksum wrong"}}) {
    CAPTURE(f.region);
    OneEntry t;
    std::string bytes = kiln::test::read_bytes(t.file);
    bytes[f.offset] = static_cast<char>(bytes[f.offset] ^ 0x10);
    kiln::test::write_bytes(t.file, bytes);
    t.expect_rejected(f.reason);
  }
}

TEST_CASE("wrong magic, wrong version and an empty file are counted, deleted misses") {
  {
    OneEntry t;
    std::string bytes = kiln::test::read_bytes(t.file);
    bytes[0] = 'X';
    kiln::test::write_bytes(t.file, bytes);
    t.expect_rejected("wrong magic");
  }
  {
    OneEntry t;
    std::string bytes = kiln::test::read_bytes(t.file);
    bytes[8] = 9;
    kiln::test::write_bytes(t.file, bytes);
    t.expect_rejected("format version 9, expected " + std::to_string(kiln::kCacheFormatVersion));
  }
  {
    OneEntry t;
    kiln::test::write_bytes(t.file, "");
    t.expect_rejected("empty file");
  }
}

TEST_CASE("a symlink or a FIFO in place of an entry is a miss and is removed, a directory is a miss left in place") {
  {
    OneEntry t;
    std::filesystem::remove(t.file);
    std::filesystem::create_directories(t.file / "inside");
    CHECK_FALSE(t.cache.load(t.key));
    CHECK(t.cache.stats().corrupt == 1);
    CHECK(std::filesystem::exists(t.file / "inside"));  // kiln made no directory there: not its to delete
    REQUIRE_FALSE(t.cache.warnings().empty());
    CHECK(t.cache.warnings().back().find("a directory, not an entry file: left in place") != std::string::npos);
  }
  {
    OneEntry t;
    // A valid entry elsewhere: following the link would give a hit.
    const auto elsewhere = t.tmp.path() / "planted.kiln";
    std::filesystem::rename(t.file, elsewhere);
    std::filesystem::create_symlink(elsewhere, t.file);
    t.expect_rejected("a symlink, not an entry file");
    CHECK(std::filesystem::exists(elsewhere));  // the link is removed, not its target
  }
  {
    OneEntry t;
    std::filesystem::remove(t.file);
    REQUIRE(::mkfifo(t.file.c_str(), 0600) == 0);
    t.expect_rejected("not a regular file");  // and the open did not block
  }
}

TEST_CASE("an entry copied under another key's name is a key mismatch") {
  OneEntry t;
  const auto other = sample_key(2);
  std::filesystem::copy_file(t.file, entries_dir(t.tmp.path() / "kiln") / (other.hex + ".kiln"));
  CHECK_FALSE(t.cache.load(other));
  CHECK(t.cache.stats().corrupt == 1);
  CHECK(t.cache.warnings().back().find("key mismatch") != std::string::npos);
  CHECK(t.cache.load(t.key));  // the original is untouched
}

TEST_CASE("store refuses an entry that load would reject, and a malformed key") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  auto entry = sample_entry(1);
  entry.kernels[0].lowered = "not_in_the_cubin";
  CHECK_FALSE(cache.store(sample_key(1), entry));
  CHECK_FALSE(cache.store(sample_key(1, 80), sample_entry(1)));  // an sm_90 binary under an sm_80 key
  auto bad_key = sample_key(1);
  bad_key.hex = "../../escape";
  CHECK_FALSE(cache.store(bad_key, sample_entry(1)));
  CHECK_FALSE(cache.load(bad_key));
  CHECK(cache.stats().store_failures == 3);
  CHECK(cache.stats().entries == 0);
  CHECK(cache.warnings().front().find("cubin lacks kernel k1 (symbol not_in_the_cubin)") != std::string::npos);
}

TEST_CASE("get_or_build builds a miss once, stores it, and serves it from disk afterwards") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  int builds = 0;
  const auto build = [&] {
    ++builds;
    return sample_entry(4);
  };
  CHECK(kiln::test::same_entry(cache.get_or_build(sample_key(4), build), sample_entry(4)));
  CHECK(kiln::test::same_entry(cache.get_or_build(sample_key(4), build), sample_entry(4)));
  CHECK(builds == 1);
  CHECK(kiln::test::temp_and_lock_files(entries_dir(tmp.path())).empty());
}

TEST_CASE("an exception from build propagates, stores nothing and leaves no lock file") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  CHECK_THROWS_WITH(cache.get_or_build(sample_key(5), []() -> kiln::CacheEntry { throw std::runtime_error("nvrtc failed"); }),
                    "nvrtc failed");
  CHECK_FALSE(cache.contains(sample_key(5)));
  CHECK(kiln::test::files_in(entries_dir(tmp.path())).empty());
}

// In the concurrency suite: also run under ThreadSanitizer (scripts/sanitize.sh).
TEST_CASE("threads of one process missing one key build it once: the file lock excludes threads too" *
          doctest::test_suite("concurrency")) {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      const auto entry = cache.get_or_build(sample_key(6), [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return sample_entry(6);
      });
      if (!kiln::test::same_entry(entry, sample_entry(6))) ++wrong;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(builds == 1);
  CHECK(wrong == 0);
  CHECK(kiln::test::temp_and_lock_files(entries_dir(tmp.path())).empty());
}

TEST_CASE("verify checks every entry and removes the bad ones with their reasons") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  const auto dir = entries_dir(tmp.path());
  for (int i = 0; i < 4; ++i) REQUIRE(cache.store(sample_key(i), sample_entry(i)));
  std::string bytes = kiln::test::read_bytes(dir / (sample_key(1).hex + ".kiln"));
  bytes[bytes.size() - 2] ^= 1;
  kiln::test::write_bytes(dir / (sample_key(1).hex + ".kiln"), bytes);
  std::filesystem::rename(dir / (sample_key(2).hex + ".kiln"), dir / (sample_key(9).hex + ".kiln"));
  kiln::test::write_bytes(dir / "notakey.kiln", std::string(80, 'j'));

  const auto report = cache.verify();
  CHECK(report.checked == 5);
  CHECK(report.removed == 3);
  REQUIRE(report.problems.size() == 3);
  std::string all;
  for (const auto& p : report.problems) all += p + "\n";
  CAPTURE(all);
  CHECK(all.find(sample_key(1).hex + ".kiln: frame checksum wrong") != std::string::npos);
  CHECK(all.find(sample_key(9).hex + ".kiln: file name is not the SHA-256") != std::string::npos);
  CHECK(all.find("notakey.kiln: wrong magic") != std::string::npos);
  CHECK(kiln::test::files_in(dir).size() == 2);
  CHECK(cache.load(sample_key(0)));
  CHECK(cache.load(sample_key(3)));
}

TEST_CASE("clear removes every entry, temp and unheld lock file, and counts the entries") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  const auto dir = entries_dir(tmp.path());
  for (int i = 0; i < 3; ++i) REQUIRE(cache.store(sample_key(i), sample_entry(i)));
  kiln::test::write_bytes(dir / (sample_key(0).hex + ".kiln.tmp." + std::to_string(::getpid()) + ".abc"), "partial");
  kiln::test::write_bytes(dir / (sample_key(1).hex + ".lock"), "");
  kiln::test::write_bytes(dir / "README", "not kiln's");
  CHECK(cache.clear().removed == 3);
  CHECK(kiln::test::files_in(dir) == std::vector<std::string>{"README"});
  CHECK(cache.stats().entries == 0);
}
