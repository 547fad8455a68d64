// The files of a cache directory: their names, and reading/writing them safely, relative to the directory's descriptor.
#pragma once

#include "base/result.hpp"

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

// <hex>.kiln an entry; <hex>.lock a build lock; <family>.pch a precompiled header NVRTC wrote and
// <family>.pch.sum its sum (base/summed_file.hpp); <name>.tmp.<pid>.<random> one of those being written
// (<name> ending .kiln, .pch or .pch.sum).
enum class CacheFileKind { entry, temp, lock, pch, pch_sum, other };

struct CacheFileName {
  CacheFileKind kind = CacheFileKind::other;
  std::string_view stem;  // what precedes ".kiln" / ".lock" / ".pch" / ".pch.sum": the key's hex for files kiln wrote
  pid_t writer = 0;       // temp files: the pid of the writing process
};

CacheFileName classify_cache_file(std::string_view name);
std::string entry_file_name(std::string_view hex);
std::string lock_file_name(std::string_view hex);
std::string temp_file_name(std::string_view hex);  // unique per process and call

// The bytes of an entry file, or why not. Symlinks are not followed and FIFOs do not block. The header
// is read and checked first (chain/entry.hpp: magic, version, sizes within the caps), then exactly the
// bytes it promises: a file costs at most its 64 bytes until its header checks out.
struct EntryFile {
  enum class Status {
    ok,
    missing,
    bad,         // not an entry: to delete (if kiln may: see remove_bad_entry)
    refused,     // not this user's, or others can write it: not loaded, not deleted (a store replaces it)
    unreadable,  // an I/O error: not loaded, left as it is
  } status = Status::missing;
  std::string bytes;
  std::string problem;  // what the file is instead ("a directory, not an entry file"), or the errno text
  struct stat st {};    // bad with a file opened: identifies what was read, so only that is deleted
  bool opened = false;
};
// `name` in the cache directory `dir` (a descriptor from disk/directory.hpp); messages show `shown`.
// With `head_only`, bytes are the header and the key text alone (at most 64 KiB past the header): what
// listing a cache needs, the frame neither read nor checked.
EntryFile read_entry_file(int dir, const std::string& name, const std::filesystem::path& shown, bool head_only = false);
// What read_entry_file does once the file is open (the fuzzer feeds it a memfd).
EntryFile read_entry_fd(int fd, const std::filesystem::path& shown, bool head_only = false);

// A file of the cache directory kiln knows the kind of, as readdir and fstatat (not following links) saw it.
struct ScannedFile {
  std::string name;
  CacheFileKind kind;
  pid_t writer;
  struct stat st;  // a symlink is seen as a symlink
};
// The cache's files in the version directory `dir` (a descriptor opened under the private rule), in
// readdir's order; files of other names are left out.
std::vector<ScannedFile> scan_cache_dir(int dir);

// Deletes a bad entry: the file read (if `file.opened`, only while the name still names it) or a symlink,
// FIFO or socket at the name. Never a directory: kiln makes none at a file's name, so one there is a
// user's, with whatever is inside. Returns whether something was deleted (false also on a failure, which
// the next reader sees again).
bool remove_bad_entry(int dir, const std::string& name, const EntryFile& file);

// Deletes the file kiln made at `name` (an entry, temp or lock file), never a directory; whether it did.
bool remove_cache_file(int dir, const std::string& name);

// Marks a file most recently used: sets its mtime to now (atime may be disabled, mtime always works).
void touch_mtime(int dir, const std::string& name);

// Writes `bytes` to a fresh temp file in `dir`, then renames it over the entry of `hex`, so a reader sees
// the old file or the whole new one. On failure: the failing step, file (as `shown` / name) and errno
// text; the temp file is removed then.
Status publish_file(int dir, const std::filesystem::path& shown, std::string_view hex, std::string_view bytes);
// The same for a file of another name (the compilers' record): `name`, through a temp file of `name`.
Status publish_named(int dir, const std::filesystem::path& shown, const std::string& name, std::string_view bytes);

}  // namespace kiln::detail
