// The per-key build lock shared by threads and processes: flock on <hex>.lock, waited for within a bound.
#pragma once

#include "base/lock_holder.hpp"
#include "base/result.hpp"
#include "base/unique_fd.hpp"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace kiln::detail {

// Holds the exclusive flock of one lock file in a cache directory. Each holder opens the file itself, so
// the lock excludes threads of one process as well as other processes, and the kernel drops it when a
// holder dies. The holder writes its pid and start time into the file, and deletes the file before
// unlocking, so that no lock files pile up; a waiter that then finds it locked a deleted file starts over
// on the name's current file.
class FileLock {
 public:
  // Why acquire gave up, for the caller's warning (and its choice of warning).
  enum class Refusal {
    cannot_lock,  // the file cannot be made or locked (a read-only directory): the write problem
    waited,       // the holder is alive and running, and `limit` went by
    stopped,      // the holder is stopped (SIGSTOP, a debugger): not waited for
  };
  struct Refused {
    Refusal why = Refusal::cannot_lock;
    std::string message;  // the file, the holder's pid and state or the errno, the wait
  };

  // The lock of `name` in the directory `dir` (the lock keeps its own copy of the descriptor), waited
  // for by polling with a growing pause, at most `limit`. A holder that is gone while its lock stays held
  // (a child it forked inherited the descriptor) is detected from the pid and start time in the file,
  // and its file removed, so the wait starts over on a fresh one; a stopped holder is not waited for.
  // `shown` names the file in messages.
  static std::optional<FileLock> acquire(int dir, const std::string& name, const std::string& shown,
                                         std::chrono::milliseconds limit, Refused& refused);
  // The lock if nobody holds it now (to remove a stale lock file); nullopt otherwise or if there is no file.
  static std::optional<FileLock> try_acquire(int dir, const std::string& name);

  FileLock(FileLock&& other) noexcept = default;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();  // deletes the file, then unlocks

 private:
  FileLock(UniqueFd dir, std::string name, UniqueFd fd) : dir_(std::move(dir)), name_(std::move(name)), fd_(std::move(fd)) {}
  UniqueFd dir_;
  std::string name_;
  UniqueFd fd_;
};

}  // namespace kiln::detail
