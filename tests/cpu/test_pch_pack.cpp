// PCH files at rest: NVRTC's bytes packed in zstd frames in the cache, unpacked into memory for NVRTC.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "base/summed_file.hpp"
#include "jit/pch_pack.hpp"
#include "jit/pch_store.hpp"

#include <zstd.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;
using kiln::test::mode_of;

// Bytes shaped like a PCH's: runs of pointers into one heap, text, and noise; zstd shrinks them ~10x.
std::string pch_like(std::size_t size) {
  std::string out;
  out.reserve(size);
  const std::string noise = kiln::test::noise(1 << 12, 7);
  for (std::uint64_t i = 0; out.size() < size; ++i) {
    const std::uint64_t pointer = 0x7fffe0600000ull + (i * 40) % (1 << 20);
    out.append(reinterpret_cast<const char*>(&pointer), sizeof pointer);
    if (i % 64 == 0) out += "/usr/local/cuda/include/cccl/cub/block/block_reduce.cuh";
    if (i % 512 == 0) out.append(noise, (i / 512) % 16 * 256, 256);
  }
  out.resize(size);
  return out;
}

}  // namespace

TEST_CASE("a PCH packs into zstd frames of at most kPchFrameBytes and unpacks to the same bytes, in memory") {
  kiln::test::TempDir dir;
  const std::string raw = pch_like(2 * kiln::detail::kPchFrameBytes + 12345);  // three frames
  kiln::test::write_bytes(dir.path() / "raw", raw);
  const fs::path packed = dir.path() / "packed";
  const mode_t old = ::umask(0);  // 0600 whatever the umask
  const kiln::detail::Status made = kiln::detail::pack_pch(dir.path() / "raw", packed, 4);
  ::umask(old);
  REQUIRE_MESSAGE(made.ok(), made.error());
  CHECK(mode_of(packed) == 0600);
  CHECK(fs::file_size(packed) * 5 < raw.size());
  CHECK(kiln::test::read_bytes(dir.path() / "raw") == raw);  // left as it was
  // A packed file is zstd's own format: the command-line tool reads it.
  const std::string bytes = kiln::test::read_bytes(packed);
  CHECK(ZSTD_getFrameContentSize(bytes.data(), bytes.size()) == kiln::detail::kPchFrameBytes);

  using kiln::detail::UnpackFill;
  for (const auto& [threads, fill] : {std::pair{1u, UnpackFill::mapped}, std::pair{3u, UnpackFill::mapped},
                                      std::pair{3u, UnpackFill::pwrite}, std::pair{8u, UnpackFill::automatic}}) {
    CAPTURE(threads);
    CAPTURE(fill == UnpackFill::mapped);
    auto unpacked = kiln::detail::UnpackedPch::open(packed, threads, kiln::detail::UnpackIn::child, fill);
    REQUIRE_MESSAGE(unpacked.ok(), unpacked.error());
    CHECK(unpacked->bytes() == raw.size());
    CHECK(unpacked->path().starts_with("/proc/self/fd/"));
    CHECK(kiln::test::read_bytes(unpacked->path()) == raw);  // what NVRTC reads by that path
    struct stat st {};
    REQUIRE(::stat(packed.c_str(), &st) == 0);
    CHECK(unpacked->same_file(st));
  }
  // Nothing raw is written beside it.
  CHECK(kiln::test::files_in(dir.path()).size() == 2);
}

TEST_CASE("an unpacked PCH names the file it came from: a file renamed over it is another") {
  kiln::test::TempDir dir;
  kiln::test::write_bytes(dir.path() / "raw", pch_like(1 << 16));
  REQUIRE(kiln::detail::pack_pch(dir.path() / "raw", dir.path() / "a", 1).ok());
  auto unpacked = kiln::detail::UnpackedPch::open(dir.path() / "a", 1);
  REQUIRE(unpacked.ok());
  REQUIRE(kiln::detail::pack_pch(dir.path() / "raw", dir.path() / "b", 1).ok());
  fs::rename(dir.path() / "b", dir.path() / "a");
  struct stat st {};
  REQUIRE(::stat((dir.path() / "a").c_str(), &st) == 0);
  CHECK_FALSE(unpacked->same_file(st));
}

TEST_CASE("a file that is not a packed PCH is refused, naming it, before anything is allocated for it") {
  kiln::test::TempDir dir;
  const fs::path path = dir.path() / "x.pch";
  const auto refused = [&](const std::string& bytes, const std::string& why) {
    kiln::test::write_bytes(path, bytes);
    const auto r = kiln::detail::UnpackedPch::open(path, 2);
    REQUIRE_FALSE(r.ok());
    INFO(r.error());
    CHECK(r.error().find(path.string()) != std::string::npos);
    CHECK(r.error().find(why) != std::string::npos);
  };
  // NVRTC's own bytes (a file of an older kiln, unpacked), an empty file, a cut frame.
  refused("EDG C/C++ version 6.6 (Aug 20 2025)", "zstd:");
  refused("", "is 0 bytes");
  kiln::test::write_bytes(dir.path() / "raw", pch_like(1 << 16));
  REQUIRE(kiln::detail::pack_pch(dir.path() / "raw", dir.path() / "good", 1).ok());
  const std::string good = kiln::test::read_bytes(dir.path() / "good");
  refused(good.substr(0, good.size() - 9), "zstd:");
  // A frame that claims more content than a packed PCH's frame holds (a real zstd frame of 16 MiB of
  // zeros: a few hundred bytes that would unpack to far more).
  const std::string zeros(2 * kiln::detail::kPchFrameBytes, '\0');
  std::string bomb(ZSTD_compressBound(zeros.size()), '\0');
  bomb.resize(ZSTD_compress(bomb.data(), bomb.size(), zeros.data(), zeros.size(), 1));
  refused(bomb, "not a frame of a packed PCH");
  // A damaged frame, caught by its checksum.
  std::string damaged = good;
  damaged[damaged.size() / 2] ^= 0x40;
  refused(damaged, "zstd:");
  CHECK_FALSE(kiln::detail::UnpackedPch::open(dir.path() / "missing", 1).ok());
}

TEST_CASE("a published PCH is packed: its sum, the cache's stats and its cap count the bytes on disk") {
  kiln::test::TempDir tmp;
  const fs::path root = tmp.path() / "kiln";
  kiln::DiskCache cache{kiln::test::config_at(root)};
  REQUIRE(cache.store(kiln::test::sample_key(1), kiln::test::sample_entry(1)));
  const fs::path entries = kiln::test::entries_dir(root);
  const fs::path final_path = kiln::detail::pch_path(entries, "family");
  const fs::path raw = kiln::detail::pch_temp_path(final_path);
  const std::string bytes = pch_like(3 << 20);
  kiln::test::write_bytes(raw, bytes);
  REQUIRE(kiln::detail::publish_pch(raw, final_path).ok());
  CHECK_FALSE(fs::exists(raw));  // NVRTC's file is gone once packed
  CHECK(fs::file_size(final_path) * 5 < bytes.size());
  CHECK(mode_of(final_path) == 0600);
  CHECK(mode_of(kiln::detail::sum_path(final_path)) == 0600);
  CHECK(kiln::detail::verify_pch(final_path).ok());
  auto unpacked = kiln::detail::UnpackedPch::open(final_path, 2);
  REQUIRE(unpacked.ok());
  CHECK(kiln::test::read_bytes(unpacked->path()) == bytes);

  std::uint64_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(entries)) {
    const auto name = e.path().filename().string();
    if (name.ends_with(".kiln") || name.ends_with(".pch") || name.ends_with(".pch.sum")) on_disk += fs::file_size(e.path());
  }
  const kiln::CacheStats s = cache.stats();
  CHECK(s.pch_files == 1);
  CHECK(s.bytes == on_disk);
  CHECK(s.bytes < bytes.size() / 5);
  // A cap above what is on disk, below NVRTC's size, keeps it.
  const kiln::PruneReport pruned = cache.prune(on_disk + 1024);
  CHECK(pruned.pch_removed == 0);
  CHECK(fs::exists(final_path));
}

TEST_CASE("a PCH unpacked in this process is sealed, and another process of the user opens it by path, read-only") {
  kiln::test::TempDir dir;
  const std::string raw = pch_like(kiln::detail::kPchFrameBytes + 777);
  kiln::test::write_bytes(dir.path() / "raw", raw);
  const fs::path packed = dir.path() / "packed";
  REQUIRE(kiln::detail::pack_pch(dir.path() / "raw", packed, 2).ok());
  auto host = kiln::detail::UnpackedPch::open(packed, 2, kiln::detail::UnpackIn::this_process);
  REQUIRE_MESSAGE(host.ok(), host.error());
  CHECK(host->bytes() == raw.size());
  const std::string shared = host->shared_path();
  CHECK(shared.starts_with("/proc/" + std::to_string(::getpid()) + "/fd/"));
  CHECK(kiln::test::read_bytes(shared) == raw);

  // What a worker does with the path: its own descriptor, named for NVRTC as /proc/self/fd/<n>.
  auto opened = kiln::detail::UnpackedPch::open_unpacked(shared, packed);
  REQUIRE_MESSAGE(opened.ok(), opened.error());
  CHECK(opened->bytes() == raw.size());
  CHECK(opened->path() != host->path());
  CHECK(kiln::test::read_bytes(opened->path()) == raw);
  struct stat st {};
  REQUIRE(::stat(packed.c_str(), &st) == 0);
  CHECK(opened->same_file(st));
  // It outlives the host's copy: the memory goes with the last descriptor.
  host = kiln::detail::UnpackedPch();
  CHECK(kiln::test::read_bytes(opened->path()) == raw);

  // Sealed: a process that opens it for writing cannot change, grow or cut what the others read.
  auto sealed = kiln::detail::UnpackedPch::open(packed, 1, kiln::detail::UnpackIn::this_process);
  REQUIRE(sealed.ok());
  const int fd = ::open(sealed->shared_path().c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  CHECK(::pwrite(fd, "x", 1, 0) == -1);
  CHECK(::ftruncate(fd, 1) == -1);
  ::close(fd);
  CHECK(kiln::test::read_bytes(sealed->path()) == raw);
}

TEST_CASE("an unpacked path that cannot be opened, or is no regular file, is refused at once, naming it") {
  kiln::test::TempDir dir;
  kiln::test::write_bytes(dir.path() / "raw", pch_like(1 << 16));
  const fs::path packed = dir.path() / "packed";
  REQUIRE(kiln::detail::pack_pch(dir.path() / "raw", packed, 1).ok());
  const std::string closed = "/proc/" + std::to_string(::getpid()) + "/fd/1000000";
  const auto missing = kiln::detail::UnpackedPch::open_unpacked(closed, packed);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().find(closed) != std::string::npos);
  // A FIFO: an open that waits for a writer would block the worker; it is opened without and refused.
  const fs::path fifo = dir.path() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto not_file = kiln::detail::UnpackedPch::open_unpacked(fifo.string(), packed);
  REQUIRE_FALSE(not_file.ok());
  CHECK(not_file.error().find("not a regular file") != std::string::npos);
  kiln::test::write_bytes(dir.path() / "empty", "");
  CHECK_FALSE(kiln::detail::UnpackedPch::open_unpacked((dir.path() / "empty").string(), packed).ok());
}
