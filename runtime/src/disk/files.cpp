// Names of cache files, and reading, publishing and deleting them without races that matter.
#include "disk/files.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <system_error>

namespace kiln::detail {

namespace {

constexpr std::string_view kEntrySuffix = ".kiln";
constexpr std::string_view kTempInfix = ".kiln.tmp.";
constexpr std::string_view kLockSuffix = ".lock";

std::string errno_text(int error) { return std::strerror(error); }

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }
  // Closes now and reports close()'s error, which on some file systems is where a failed write shows.
  int close() noexcept {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::uint64_t unique_suffix() {
  std::uint64_t random = 0;
  if (getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random)) {
    random = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  static std::atomic<std::uint64_t> counter{0};  // distinct names even if the random source repeats
  return random ^ (counter.fetch_add(1) << 48);
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

std::string entry_file_name(std::string_view hex) { return std::string(hex) + std::string(kEntrySuffix); }
std::string lock_file_name(std::string_view hex) { return std::string(hex) + std::string(kLockSuffix); }

std::string temp_file_name(std::string_view hex) {
  char random[17];
  const auto end = std::to_chars(random, random + 16, unique_suffix(), 16).ptr;
  return std::string(hex) + std::string(kTempInfix) + std::to_string(::getpid()) + "." + std::string(random, end);
}

CacheFileName classify_cache_file(std::string_view name) {
  CacheFileName f;
  if (const auto at = name.find(kTempInfix); at != std::string_view::npos && at > 0) {
    const std::string_view rest = name.substr(at + kTempInfix.size());
    const auto dot = rest.find('.');
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec == std::errc() && dot != std::string_view::npos && end == rest.data() + dot && pid > 0) {
      f.kind = CacheFileKind::temp;
      f.stem = name.substr(0, at);
      f.writer = pid;
    }
    return f;
  }
  if (name.size() > kEntrySuffix.size() && name.ends_with(kEntrySuffix)) {
    f.kind = CacheFileKind::entry;
    f.stem = name.substr(0, name.size() - kEntrySuffix.size());
  } else if (name.size() > kLockSuffix.size() && name.ends_with(kLockSuffix)) {
    f.kind = CacheFileKind::lock;
    f.stem = name.substr(0, name.size() - kLockSuffix.size());
  }
  return f;
}

EntryFile read_entry_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
  EntryFile f;
  // O_NOFOLLOW: a symlink is refused (ELOOP), never followed; O_NONBLOCK: a FIFO cannot hang the reader.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) {
      f.status = EntryFile::Status::missing;
    } else if (error == ELOOP || error == ENXIO) {
      f.status = EntryFile::Status::bad;
      f.problem = error == ELOOP ? "a symlink, not an entry file" : "a socket or device, not an entry file";
    } else {
      f.status = EntryFile::Status::unreadable;
      f.problem = "open: " + errno_text(error);
    }
    return f;
  }
  if (::fstat(fd.get(), &f.st) != 0) {
    f.status = EntryFile::Status::unreadable;
    f.problem = "fstat: " + errno_text(errno);
    return f;
  }
  f.opened = true;
  f.status = EntryFile::Status::bad;
  if (S_ISDIR(f.st.st_mode)) {
    f.problem = "a directory, not an entry file";
  } else if (!S_ISREG(f.st.st_mode)) {
    f.problem = "not a regular file";
  } else if (f.st.st_size == 0) {
    f.problem = "empty file";
  } else if (static_cast<std::uint64_t>(f.st.st_size) > max_bytes) {
    f.problem = "too large (" + std::to_string(f.st.st_size) + " bytes)";
  } else {
    f.bytes.resize(static_cast<std::size_t>(f.st.st_size));
    std::size_t done = 0;
    while (done < f.bytes.size()) {
      const ssize_t n = ::read(fd.get(), f.bytes.data() + done, f.bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        f.status = EntryFile::Status::unreadable;
        f.problem = "read: " + errno_text(errno);
        return f;
      }
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    // Entries are never rewritten in place, so a size change means something else is writing here.
    if (done != f.bytes.size()) {
      f.problem = "shrank while being read";
    } else {
      f.status = EntryFile::Status::ok;
    }
  }
  return f;
}

void remove_bad_entry(const std::filesystem::path& path, const EntryFile& file) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0) return;
  // A writer may have renamed a good entry over the bad one since it was read: delete only what was read.
  if (file.opened && !same_file(now, file.st)) return;
  std::error_code ignored;
  if (S_ISDIR(now.st_mode)) {
    std::filesystem::remove_all(path, ignored);
  } else {
    std::filesystem::remove(path, ignored);
  }
}

void touch_mtime(const std::filesystem::path& path) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);  // best effort: a read-only dir still serves
}

Status publish_file(const std::filesystem::path& dir, std::string_view hex, std::string_view bytes) {
  const std::filesystem::path temp = dir / temp_file_name(hex);
  const std::filesystem::path final_path = dir / entry_file_name(hex);
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return detail::fail("creating " + temp.string() + ": " + errno_text(errno));
  const auto failed_at = [&](std::string_view step, int error) {
    ::unlink(temp.c_str());
    return detail::fail(std::string(step) + " " + temp.string() + ": " + errno_text(error));
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    // A short write is retried; the retry then reports why (EFBIG past RLIMIT_FSIZE, ENOSPC, EDQUOT).
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed_at("writing", n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  // No fsync: after a power loss an entry may be empty or torn, which load() detects, deletes and
  // rebuilds, so durability would only save one rebuild at the price of a disk flush per store.
  if (fd.close() != 0) return failed_at("closing", errno);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) return failed_at("renaming", errno);
  return ok();
}

}  // namespace kiln::detail
