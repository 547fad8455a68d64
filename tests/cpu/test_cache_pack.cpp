// Cache packs: a round trip with filters, and packs that are truncated, altered, crafted or not packs at
// all, each refused whole with a reason that says so (nothing imported).
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/cache_pack.hpp>
#include <kiln/error.hpp>

#include "cache_test_util.hpp"
#include "chain/key.hpp"
#include "memory_limit.hpp"
#include "text_util.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

using kiln::test::config_at;
using kiln::test::read_bytes;
using kiln::test::sample_entry;
using kiln::test::sample_key;
using kiln::test::sparse_file;
using kiln::test::TempDir;
using kiln::test::write_bytes;

namespace {

// A cache with entries 1-3 for sm_90 and 4-5 for sm_80, all of registry "tests".
void fill(kiln::DiskCache& cache) {
  for (int n = 1; n <= 5; ++n) REQUIRE(cache.store(sample_key(n, n <= 3 ? 90 : 80), sample_entry(n, n <= 3 ? 90 : 80)));
}

// The message import_pack refuses `pack` with; fails the test if it imports anything.
std::string refusal(const std::string& pack) {
  TempDir tmp;
  const auto file = tmp.path() / "bad.pack";
  write_bytes(file, pack);
  kiln::DiskCache cache(config_at(tmp.path() / "cache"));
  try {
    kiln::import_pack(cache, file);
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::cache);
    CHECK(cache.stats().entries == 0);
    const std::string what = e.what();
    CHECK(what.find("bad.pack is refused, nothing was imported") != std::string::npos);
    return what;
  }
  FAIL("the pack was imported");
  return {};
}

// `pack` with its trailing digest made right again: a crafted pack, not a damaged one.
std::string redigested(std::string pack) {
  pack.resize(pack.size() - 32);
  const auto digest = kiln::detail::sha256(pack);
  pack.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return pack;
}

}  // namespace

TEST_CASE("a cache pack carries the matching entries to another cache byte for byte") {
  TempDir tmp;
  kiln::DiskCache source(config_at(tmp.path() / "source"));
  fill(source);
  const auto all = tmp.path() / "all.pack";
  const kiln::PackReport exported = kiln::export_pack(source, all);
  CHECK(exported.entries == 5);
  CHECK(exported.bytes == std::filesystem::file_size(all));
  CHECK(read_bytes(all).find("tests/unit_4 sm_80") != std::string::npos);  // the manifest is readable

  kiln::DiskCache target(config_at(tmp.path() / "target"));
  REQUIRE(target.store(sample_key(1), sample_entry(1)));  // already there: kept, not counted as new
  const kiln::PackReport imported = kiln::import_pack(target, all);
  CHECK(imported.entries == 5);
  CHECK(imported.added == 4);
  for (int n = 1; n <= 5; ++n) {
    const unsigned arch = n <= 3 ? 90 : 80;
    const auto entry = target.load(sample_key(n, arch));
    REQUIRE(entry);
    CHECK(kiln::test::same_entry(*entry, sample_entry(n, arch)));
    const auto name = sample_key(n, arch).hex + ".kiln";
    CHECK(read_bytes(kiln::test::entries_dir(tmp.path() / "target") / name) ==
          read_bytes(kiln::test::entries_dir(tmp.path() / "source") / name));
  }
  CHECK(kiln::import_pack(target, all).added == 0);  // again: nothing new

  CHECK(kiln::export_pack(source, tmp.path() / "90.pack", {.registry = "", .arch = 90}).entries == 3);
  CHECK(kiln::export_pack(source, tmp.path() / "tests.pack", {.registry = "tests", .arch = 80}).entries == 2);
  const kiln::PackReport none = kiln::export_pack(source, tmp.path() / "none.pack", {.registry = "other", .arch = 0});
  CHECK(none.entries == 0);
  kiln::DiskCache empty(config_at(tmp.path() / "empty"));
  CHECK(kiln::import_pack(empty, tmp.path() / "none.pack").entries == 0);
}

TEST_CASE("a truncated or altered pack is refused whole") {
  TempDir tmp;
  kiln::DiskCache source(config_at(tmp.path() / "source"));
  fill(source);
  const auto file = tmp.path() / "p.pack";
  kiln::export_pack(source, file);
  const std::string pack = read_bytes(file);

  SUBCASE("truncated anywhere") {
    CHECK(refusal("").find("it is empty") != std::string::npos);
    CHECK(refusal(pack.substr(0, 5)).find("truncated") != std::string::npos);
    for (std::size_t n = 20; n < pack.size(); n += 97) {
      CAPTURE(n);
      CHECK(refusal(pack.substr(0, n)).find("truncated") != std::string::npos);
    }
    CHECK(refusal(pack.substr(0, pack.size() - 1)).find("truncated or altered") != std::string::npos);
  }
  SUBCASE("any byte altered") {
    for (std::size_t at = 0; at < pack.size(); at += 61) {
      std::string altered = pack;
      altered[at] = static_cast<char>(altered[at] ^ 0x01);
      CAPTURE(at);
      const std::string why = refusal(altered);
      CHECK((why.find("truncated or altered") != std::string::npos || why.find("not a kiln cache pack") != std::string::npos));
    }
  }
  SUBCASE("bytes appended") { CHECK(refusal(pack + "trailing").find("truncated or altered") != std::string::npos); }
  SUBCASE("crafted: a right digest over a bad entry, a bad manifest, another version") {
    std::string bad_entry = pack;
    bad_entry[bad_entry.size() - 40] = static_cast<char>(bad_entry[bad_entry.size() - 40] ^ 0x01);
    CHECK(refusal(redigested(bad_entry)).find("entry 5") != std::string::npos);
    std::string bad_manifest = pack;
    bad_manifest[30] = 'x';  // in the first key of the manifest
    CHECK(refusal(redigested(bad_manifest)).find("manifest") != std::string::npos);
    std::string other_version = pack;
    other_version[14] = 2;  // the pack format version, after the magic
    CHECK(refusal(redigested(other_version)).find("pack format version 2") != std::string::npos);
    std::string other_entries = pack;
    other_entries[18] = 9;  // the entries' cache format version
    CHECK(refusal(redigested(other_entries)).find("cache format 9") != std::string::npos);
  }
  SUBCASE("not a pack") { CHECK(refusal(std::string(100, 'x')).find("not a kiln cache pack") != std::string::npos); }
}

TEST_CASE("a manifest line that names another unit or architecture than its entry is refused") {
  TempDir tmp;
  kiln::DiskCache source(config_at(tmp.path() / "source"));
  fill(source);
  const auto file = tmp.path() / "p.pack";
  kiln::export_pack(source, file);
  const std::string pack = read_bytes(file);
  for (const auto& [from, to] : {std::pair{"tests/unit_1 sm_90", "tests/unit_1 sm_80"},
                                 std::pair{"tests/unit_2 sm_90", "tests/scale1 sm_90"},
                                 std::pair{"tests/unit_3 sm_90", "other/unit_3 sm_90"}}) {
    std::string relabelled = pack;
    const auto at = relabelled.find(from);
    REQUIRE(at != std::string::npos);
    relabelled.replace(at, std::strlen(from), to);  // the same length: only the label differs
    CAPTURE(to);
    const std::string why = refusal(redigested(relabelled));
    CHECK(why.find(std::string("says '") + to + "', but its entry is '" + from + "'") != std::string::npos);
  }
}

namespace {

using kiln::test::kMiB;

}  // namespace

TEST_CASE("a large file is refused from its header, in bounded memory: not a pack at once, a damaged one in pieces") {
  TempDir tmp;
  const auto garbage = tmp.path() / "garbage.kpack";
  sparse_file(garbage, "", std::uint64_t{4} << 30);  // 4 GiB of zeros: was read whole before the magic was looked at
  const auto damaged = tmp.path() / "damaged.kpack";
  // A pack's header (version 1, this entry format, no manifest), then 256 MiB of zeros: its digest cannot match.
  std::string head("\x89KILN-PACK\r\n\x1a\n", 14);
  head += std::string("\x01\0\0\0", 4) + static_cast<char>(kiln::kCacheFormatVersion) + std::string(3, '\0') +
          std::string(8, '\0');
  sparse_file(damaged, head, 256 * kMiB);
  const int status = kiln::test::run_with_memory_headroom(32 * kMiB, [&] {
    kiln::test::ChildChecks checks;
    kiln::DiskCache cache(config_at(tmp.path() / "cache"));
    const auto why = [&](const std::filesystem::path& file) -> std::string {
      try {
        kiln::import_pack(cache, file);
      } catch (const kiln::Error& e) {
        return e.what();
      }
      return "imported";
    };
    const auto start = std::chrono::steady_clock::now();
    const std::string not_pack = why(garbage);
    checks.expect(not_pack.find("not a kiln cache pack") != std::string::npos, "not a pack: " + not_pack);
    checks.expect(std::chrono::steady_clock::now() - start < std::chrono::seconds(2), "at once");
    const std::string damaged_why = why(damaged);
    checks.expect(damaged_why.find("truncated or altered") != std::string::npos, "damaged: " + damaged_why);
    checks.expect(cache.stats().entries == 0, "nothing imported");
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("a pack whose entries' sizes do not add up to its size is refused before its digest is taken") {
  TempDir tmp;
  // A pack's header (version 1, this entry format), a manifest of one entry of 100 bytes, then zeros to the
  // largest size a pack may have: its digest was taken over all 4 GiB (16 s) before the sizes were looked at.
  const std::string line = std::string(64, 'a') + " 100 tests/unit_1 sm_90\n";
  std::string head("\x89KILN-PACK\r\n\x1a\n", 14);
  head += std::string("\x01\0\0\0", 4) + static_cast<char>(kiln::kCacheFormatVersion) + std::string(3, '\0');
  const std::uint64_t manifest_size = line.size();
  head.append(reinterpret_cast<const char*>(&manifest_size), 8);
  head += line;
  const auto large = tmp.path() / "large.kpack";
  sparse_file(large, head, std::uint64_t{4} << 30);
  kiln::DiskCache cache(config_at(tmp.path() / "cache"));
  std::string why = "imported";
  try {
    kiln::import_pack(cache, large);
  } catch (const kiln::Error& e) {
    why = e.what();
  }
  CAPTURE(why);
  CHECK(why.find("it is damaged: truncated or altered (its manifest lists 100 bytes of entries, but ") !=
        std::string::npos);
  CHECK(why.find("SHA-256") == std::string::npos);  // refused from the sizes, not from the digest
  // An entry larger than any entry can be: likewise, from the manifest.
  write_bytes(tmp.path() / "huge.kpack", head.substr(0, head.size() - line.size()) + std::string(64, 'a') +
                                              " 99999999999 tests/unit_1 sm_90\n" + std::string(64, '\0'));
  std::string huge = read_bytes(tmp.path() / "huge.kpack");
  const std::uint64_t huge_manifest = huge.size() - 30 - 64;
  std::memcpy(huge.data() + 22, &huge_manifest, 8);
  CHECK(refusal(huge).find("entry 1 is 99999999999 bytes, larger than a cache entry can be") != std::string::npos);
}

TEST_CASE("export onto a FIFO or a directory refuses it and leaves it as it is") {
  TempDir tmp;
  kiln::DiskCache source(config_at(tmp.path() / "source"));
  fill(source);
  const auto fifo = tmp.path() / "pipe.kpack";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto directory = tmp.path() / "dir.kpack";
  std::filesystem::create_directory(directory);
  for (const auto& [target, kind] : {std::pair{fifo, "a FIFO"}, std::pair{directory, "a directory"}}) {
    std::string why = "exported";
    try {
      kiln::export_pack(source, target);
    } catch (const kiln::Error& e) {
      why = e.what();
    }
    CAPTURE(why);
    CHECK(why.find(target.string() + " is " + kind + ", not a regular file: it is not replaced") != std::string::npos);
  }
  CHECK(std::filesystem::is_fifo(std::filesystem::symlink_status(fifo)));
  CHECK(std::filesystem::is_directory(directory));
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) files += e.is_regular_file();
  CHECK(files == 0);  // no temp file left beside them
}

TEST_CASE("import of a FIFO or a directory is refused at once: an open that could block is never made") {
  TempDir tmp;
  const auto fifo = tmp.path() / "pipe.kpack";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // In a child with an alarm: an import that blocks in open() (no writer ever comes) fails the test, not hangs it.
  const int status = kiln::test::run_in_child([&] {
    ::alarm(10);
    kiln::test::ChildChecks checks;
    kiln::DiskCache cache(config_at(tmp.path() / "cache"));
    for (const auto& [file, kind] : {std::pair{fifo, "a FIFO"}, std::pair{tmp.path(), "a directory"}}) {
      std::string why = "imported";
      try {
        kiln::import_pack(cache, file);
      } catch (const kiln::Error& e) {
        why = e.what();
      }
      checks.expect(why.find(std::string(kind) + ", not a regular file") != std::string::npos, "says what it is: " + why);
    }
    return checks.exit_code();
  });
  CHECK(status == 0);
}

TEST_CASE("export writes through no link planted in a shared directory: the temp name is unguessable and exclusive") {
  TempDir tmp;
  kiln::DiskCache source(config_at(tmp.path() / "source"));
  fill(source);
  const auto share = tmp.path() / "share";
  std::filesystem::create_directory(share);
  const auto victim = tmp.path() / "victim";
  write_bytes(victim, "precious");
  const auto pack = share / "x.kpack";
  // The temp name an export used to open with O_CREAT | O_TRUNC, following links.
  const auto planted = std::filesystem::path(pack.string() + ".tmp." + std::to_string(::getpid()));
  std::filesystem::create_symlink(victim, planted);
  CHECK(kiln::export_pack(source, pack).entries == 5);
  CHECK(read_bytes(victim) == "precious");
  CHECK(std::filesystem::is_symlink(planted));  // not kiln's: left alone
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(pack)));
  kiln::DiskCache target(config_at(tmp.path() / "target"));
  CHECK(kiln::import_pack(target, pack).added == 5);

  // A link at the pack's own name is replaced, not followed.
  std::filesystem::remove(pack);
  std::filesystem::create_symlink(victim, pack);
  kiln::export_pack(source, pack);
  CHECK(read_bytes(victim) == "precious");
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(pack)));
  // Readable by others as a file made by open() is (0644 less the umask), and no temp file is left.
  const mode_t mask = ::umask(022);
  ::umask(mask);
  CHECK((std::filesystem::status(pack).permissions() & std::filesystem::perms::all) ==
        static_cast<std::filesystem::perms>(0644 & ~mask));
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(share)) files += e.path() != planted;
  CHECK(files == 1);
}

TEST_CASE("a missing pack and an unusable cache are errors that say which") {
  TempDir tmp;
  kiln::DiskCache cache(config_at(tmp.path() / "cache"));
  const auto error_of = [](const auto& call) -> std::string {
    try {
      call();
    } catch (const kiln::Error& e) {
      return e.what();
    }
    return "no error";
  };
  const auto missing = tmp.path() / "missing.pack";
  CHECK(error_of([&] { kiln::import_pack(cache, missing); }).find("cannot open " + missing.string()) != std::string::npos);
  kiln::CacheConfig off = config_at(tmp.path() / "off");
  off.enabled = false;
  kiln::DiskCache disabled(off);
  CHECK(error_of([&] { kiln::export_pack(disabled, tmp.path() / "x.pack"); }).find("not in use") != std::string::npos);
  CHECK(error_of([&] { kiln::export_pack(cache, tmp.path() / "no" / "such" / "dir.pack"); }).find("cannot write") !=
        std::string::npos);
}

TEST_CASE("an entry filter matches a key's registry and architecture") {
  const kiln::CacheKey key = sample_key(1, 90);
  CHECK(kiln::EntryFilter{}.matches(key));
  CHECK(kiln::EntryFilter{"tests", 90}.matches(key));
  CHECK_FALSE(kiln::EntryFilter{"test", 0}.matches(key));
  CHECK_FALSE(kiln::EntryFilter{"", 80}.matches(key));
}
