// The files of a cache directory: their names, and reading/writing them safely.
#pragma once

#include "base/result.hpp"

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kiln::detail {

// <hex>.kiln an entry; <hex>.kiln.tmp.<pid>.<random> an entry being written; <hex>.lock a build lock.
enum class CacheFileKind { entry, temp, lock, other };

struct CacheFileName {
  CacheFileKind kind = CacheFileKind::other;
  std::string_view stem;  // what precedes ".kiln" / ".lock": the key's hex for files kiln wrote
  pid_t writer = 0;       // temp files: the pid of the writing process
};

CacheFileName classify_cache_file(std::string_view name);
std::string entry_file_name(std::string_view hex);
std::string lock_file_name(std::string_view hex);
std::string temp_file_name(std::string_view hex);  // unique per process and call

// The bytes of an entry file, or why not. Symlinks are not followed and FIFOs do not block.
struct EntryFile {
  enum class Status { ok, missing, bad, unreadable } status = Status::missing;
  std::string bytes;
  std::string problem;  // bad: what the file is instead ("a directory, not an entry file"); unreadable: the errno text
  struct stat st {};    // ok/bad with a file opened: identifies what was read, so only that is deleted
  bool opened = false;
};
EntryFile read_entry_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Deletes a bad entry: the file read (if `file.opened`, only while the path still names it) or whatever
// non-file sits at the path (directory, symlink). Failures are ignored: the next reader sees it again.
void remove_bad_entry(const std::filesystem::path& path, const EntryFile& file);

// Marks a file most recently used: sets its mtime to now (atime may be disabled, mtime always works).
void touch_mtime(const std::filesystem::path& path);

// Writes `bytes` to a fresh temp file next to `final_path`, then renames it over `final_path`, so a
// reader sees the old file or the whole new one. On failure: the failing step, file and errno text; the
// temp file is removed then.
Status publish_file(const std::filesystem::path& dir, std::string_view hex, std::string_view bytes);

}  // namespace kiln::detail
