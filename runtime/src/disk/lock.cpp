// Flock-based per-key lock files that delete themselves, name their holder, and are never waited for forever.
#include "disk/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace kiln::detail {

namespace {

// The pause between tries grows from 1 ms to this: a compile takes seconds, so a waiter notices the
// holder's end within a tenth of a second, at ten tries a second.
constexpr std::chrono::milliseconds kLongestPause{100};

// Whether `fd` is still the file named `name` in `dir`: the previous holder may have deleted it (and
// someone may have created a new one) between our open() and our flock().
bool still_linked(int fd, int dir, const std::string& name) {
  struct stat held {}, named {};
  return ::fstat(fd, &held) == 0 && ::fstatat(dir, name.c_str(), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

int flock_retrying(int fd, int operation) {
  int rc;
  do {
    rc = ::flock(fd, operation);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

}  // namespace

std::optional<FileLock> FileLock::acquire(int dir, const std::string& name, const std::string& shown,
                                          std::chrono::milliseconds limit, Refused& refused) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::chrono::milliseconds pause{1};
  for (int broken = 0;;) {
    UniqueFd fd(::openat(dir, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd.valid()) {
      refused = {Refusal::cannot_lock, "opening lock file " + shown + ": " + std::strerror(errno)};
      return std::nullopt;
    }
    if (flock_retrying(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      if (!still_linked(fd.get(), dir, name)) continue;  // the holder deleted it as we locked it: start over
      record_holder(fd.get());
      UniqueFd own_dir(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
      return FileLock(std::move(own_dir), name, std::move(fd));
    }
    if (errno != EWOULDBLOCK) {
      refused = {Refusal::cannot_lock, "locking " + shown + ": " + std::strerror(errno)};
      return std::nullopt;
    }
    const auto holder = read_holder(fd.get());
    const std::string who = holder ? "pid " + std::to_string(holder->pid) : "a process that has not said which";
    switch (holder_is(holder)) {
      case HolderIs::gone:
        // Its lock lives on in a descriptor some child inherited; nobody is building. Remove that file (only
        // if the name still names it) and start over on a fresh one. Bounded: each round removes one file,
        // and at worst two processes build the key, which publishing by rename makes harmless.
        if (++broken <= 16 && still_linked(fd.get(), dir, name)) {
          ::unlinkat(dir, name.c_str(), 0);
          continue;
        }
        break;
      case HolderIs::stopped:
        refused = {Refusal::stopped, shown + " is held by " + who + ", which is stopped (SIGSTOP or a debugger)"};
        return std::nullopt;
      case HolderIs::running:
      case HolderIs::unknown: break;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (waited >= limit) {
      refused = {Refusal::waited, "waited " + seconds_text(waited) + " for " + shown + ", held by " + who +
                                      " (KILN_CACHE_LOCK_TIMEOUT=" + std::to_string(limit.count() / 1000) + " s)"};
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>({pause, limit - waited, kLongestPause}));
    pause = std::min(pause * 2, kLongestPause);  // doubled without end, it overflowed after ~6 s of waiting
  }
}

std::optional<FileLock> FileLock::try_acquire(int dir, const std::string& name) {
  UniqueFd fd(::openat(dir, name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  if (flock_retrying(fd.get(), LOCK_EX | LOCK_NB) != 0 || !still_linked(fd.get(), dir, name)) return std::nullopt;
  UniqueFd own_dir(::fcntl(dir, F_DUPFD_CLOEXEC, 0));
  return FileLock(std::move(own_dir), name, std::move(fd));
}

FileLock::~FileLock() {
  if (!fd_.valid()) return;
  // Unlink while still holding the lock, so a waiter wakes up on a deleted file and starts over; and
  // only our own file: if ours was deleted by hand, the name may be another holder's.
  if (dir_.valid() && still_linked(fd_.get(), dir_.get(), name_)) ::unlinkat(dir_.get(), name_.c_str(), 0);
}

}  // namespace kiln::detail
