// A PCH file at rest: NVRTC's bytes kept as zstd frames in the cache, unpacked into memory for NVRTC
// (docs/DESIGN.md, "PCH files at rest").
//
// NVRTC writes a family's precompiled header as ~170-200 MB of heap image; zstd keeps it in ~1/10. The
// file is a run of independent zstd frames (each with its content size and checksum, at most
// kPchFrameBytes of content), so that a worker unpacks it on several threads. NVRTC reads a PCH only by
// path (--use-pch=<file>, mapped privately at its recorded addresses): the worker unpacks into an
// anonymous memory file (memfd) and hands NVRTC /proc/self/fd/<n>; nothing raw is written to disk.
// The JIT pool's host process unpacks a family's file once, in itself, and its workers open that memory
// file by path (/proc/<host pid>/fd/<n>); a worker that cannot unpacks the file in a child process
// (fork): NVRTC refuses a PCH in a process whose heap the unpacking's threads and buffers have moved.
// Packing runs in a child too.
#pragma once

#include "base/result.hpp"

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace kiln::detail {

// Content per frame: small enough to spread a file over a machine's cores, large enough that zstd's
// ratio is that of the whole file (10.4x either way on a CUB family's PCH).
inline constexpr std::size_t kPchFrameBytes = std::size_t{8} << 20;
// The most an unpacked PCH may hold (NVRTC's are ~200 MB): a file claiming more is refused unread.
inline constexpr std::uint64_t kMaxPchBytes = std::uint64_t{4} << 30;

// Writes NVRTC's PCH file `raw` packed to `packed` (created 0600; it must not exist), compressing its
// frames on up to `threads` threads. `raw` is left as it is.
Status pack_pch(const std::filesystem::path& raw, const std::filesystem::path& packed, unsigned threads);

// Where a PCH is unpacked: in a child process (a worker, whose heap NVRTC's PCH depends on), or in this
// one (the pool's host, where NVRTC does not run).
enum class UnpackIn { child, this_process };

// How the memory file is filled: through a shared mapping whose pages each thread makes for itself
// (MADV_POPULATE_WRITE), falling back to pwrite where the kernel lacks it; or with pwrite alone, whose
// pages the kernel makes one writer at a time. `automatic`: mapped on 8 threads or more, where it is the
// faster (a 178 MB PCH on a 16-core host: 79-81 ms against 97-101 ms), else pwrite (on 4 threads 98
// against 114 ms; bench_pch_first_use prints both).
enum class UnpackFill { automatic, mapped, pwrite };

// A packed PCH unpacked into an anonymous memory file, for NVRTC to read by path. Sealed once written
// (F_SEAL_WRITE, _GROW, _SHRINK): a process that opens it by path reads it and cannot change it.
class UnpackedPch {
 public:
  UnpackedPch() = default;
  ~UnpackedPch();
  UnpackedPch(UnpackedPch&& other) noexcept;
  UnpackedPch& operator=(UnpackedPch&& other) noexcept;
  UnpackedPch(const UnpackedPch&) = delete;
  UnpackedPch& operator=(const UnpackedPch&) = delete;

  // Unpacks the file at `packed` on up to `threads` threads. Fails, naming the file, on anything that is
  // not a run of zstd frames within the bounds above, or when memory cannot be had.
  static Result<UnpackedPch> open(const std::filesystem::path& packed, unsigned threads,
                                  UnpackIn where = UnpackIn::child, UnpackFill fill = UnpackFill::automatic);
  // Opens `unpacked`, the packed file at `packed` already unpacked by another process (its `shared_path()`),
  // without blocking. Fails, naming it, when it cannot be opened or is not a regular file of at most
  // kMaxPchBytes.
  static Result<UnpackedPch> open_unpacked(const std::string& unpacked, const std::filesystem::path& packed);

  // /proc/self/fd/<n>: what NVRTC's --use-pch is given. Valid while this object lives.
  std::string path() const;
  // /proc/<this pid>/fd/<n>: where another process of the same user opens it, while this object lives
  // and this process is dumpable (prctl PR_GET_DUMPABLE: /proc/<pid>/fd of one that is not is root's).
  std::string shared_path() const;
  std::uint64_t bytes() const noexcept { return bytes_; }
  // The packed file it came from (device and inode): a file replaced since is another.
  bool same_file(const struct stat& packed) const noexcept;

 private:
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Threads to pack or unpack a PCH on: the machine's cores, at most 16.
unsigned pch_threads();

}  // namespace kiln::detail
