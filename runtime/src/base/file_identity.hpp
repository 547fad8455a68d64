// A file's identity as the dynamic loader would find it: what changes when a file is replaced, by a package
// upgrade or by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::detail {

struct FileIdentity {
  std::string path;
  std::uint64_t device = 0, inode = 0, size = 0, mtime_ns = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// The file at `path` now (stat, following symlinks as the loader does); nullopt when there is none.
std::optional<FileIdentity> identify_file(const std::string& path);
// The file of the loaded shared object that holds `symbol` (dladdr); nullopt when none can be told.
std::optional<FileIdentity> file_of(const void* symbol);

}  // namespace kiln::detail
