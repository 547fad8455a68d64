// The per-key build lock shared by threads and processes: flock on <hex>.lock.
#pragma once

#include "base/result.hpp"

#include <filesystem>
#include <optional>
#include <string>

namespace kiln::detail {

// Holds the exclusive flock of one lock file. Each holder opens the file itself, so the lock excludes
// threads of one process as well as other processes, and the kernel drops it when a holder dies.
// The holder deletes the file before unlocking, so that no lock files pile up; a waiter that then
// finds it locked a deleted file starts over on the path's current file.
class FileLock {
 public:
  // Waits for the lock, creating the file if needed; fails when the file cannot be opened or locked
  // (a read-only directory).
  static Result<FileLock> acquire(const std::filesystem::path& path);
  // The lock if nobody holds it now (to remove a stale lock file); nullopt otherwise or if there is no file.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();  // deletes the file, then unlocks

 private:
  FileLock(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::filesystem::path path_;
  int fd_;
};

}  // namespace kiln::detail
