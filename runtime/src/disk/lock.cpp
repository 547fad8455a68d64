// Flock-based per-key lock files that delete themselves and survive dead holders.
#include "disk/lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::detail {

namespace {

// Whether `fd` is still the file at `path`: the previous holder may have deleted it (and someone may
// have created a new one) between our open() and our flock().
bool still_linked(int fd, const std::filesystem::path& path) {
  struct stat held {}, named {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

int flock_retrying(int fd, int operation) {
  int rc;
  do {
    rc = ::flock(fd, operation);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

}  // namespace

Result<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return fail("opening lock file " + path.string() + ": " + std::strerror(errno));
    if (flock_retrying(fd, LOCK_EX) != 0) {
      const int error = errno;
      ::close(fd);
      return fail("locking " + path.string() + ": " + std::strerror(error));
    }
    if (still_linked(fd, path)) return FileLock(path, fd);
    ::close(fd);
  }
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  if (flock_retrying(fd, LOCK_EX | LOCK_NB) == 0 && still_linked(fd, path)) return FileLock(path, fd);
  ::close(fd);
  return std::nullopt;
}

FileLock::FileLock(FileLock&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) { other.fd_ = -1; }

FileLock::~FileLock() {
  if (fd_ < 0) return;
  // Unlink while still holding the lock, so a waiter wakes up on a deleted file and starts over; and
  // only our own file: if ours was deleted by hand, the path may name another holder's.
  if (still_linked(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace kiln::detail
