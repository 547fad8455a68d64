// The pool host's own unpacked copies of its families' PCH files, which its workers open by path
// (docs/DESIGN.md, "PCH files at rest": unpacked once per process, not once per worker).
#pragma once

#include "base/result.hpp"
#include "jit/pch_pack.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::detail {

// The most families whose PCH the host keeps unpacked at once (~170-200 MB of memory each for CCCL
// code): the least recently used goes first. A request in flight holds its copy until answered, and a
// worker that opened one keeps it while it serves that family.
inline constexpr std::size_t kHostPchFamilies = 2;

class HostPchCopies {
 public:
  explicit HostPchCopies(std::size_t most = kHostPchFamilies) : most_(most) {}

  // A copy a worker opens by its shared_path().
  struct Copy {
    std::shared_ptr<const UnpackedPch> pch;  // null where none is made: the worker unpacks the file itself
    double unpack_ms = 0;                    // this call's unpacking (0: the copy was made before)
  };

  // The copy of `family`'s PCH file at `packed` (checked against its sum already), unpacked now on
  // pch_threads() threads in this process unless a copy of that same file is kept. No copy where this
  // process is not dumpable (workers could not open it). Fails, naming the file, where it cannot be
  // unpacked; callers of one family wait while another unpacks it.
  Result<Copy> get(const std::string& family, const std::filesystem::path& packed);
  // Forgets `family`'s copy (its file was refused), or every copy (the pool is idle): their memory goes
  // once no request in flight holds them.
  void drop(const std::string& family);
  void drop_all();

 private:
  struct Slot {
    std::mutex making;  // held while this family's copy is made
    std::shared_ptr<const UnpackedPch> pch;
    std::uint64_t used = 0;  // when it was last asked for, in calls
  };
  void evict_beyond_most(const std::string& keep);

  const std::size_t most_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
  std::uint64_t calls_ = 0;
};

// Whether other processes of this user can open this process's /proc/<pid>/fd (PR_GET_DUMPABLE is 1).
bool fds_openable_by_children();

}  // namespace kiln::detail
