// Opening and replacing files at a user's path without blocking or following links: see base/plain_file.hpp.
#include "base/plain_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

namespace kiln::detail {

namespace {

std::string errno_text(int error) { return std::strerror(error); }

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

// The process's umask, read without changing it (umask(2) sets it, which other threads would see).
mode_t current_umask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("Umask:")) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
}

}  // namespace

Result<UniqueFd> open_regular(const std::filesystem::path& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644));
  if (!fd.valid()) {
    // ENXIO: a FIFO opened for writing with no reader, or a socket.
    if (errno == ENXIO) return fail(path.string() + " is a FIFO or socket, not a regular file");
    return fail("cannot open " + path.string() + ": " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail("cannot stat " + path.string() + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(path.string() + " is " + kind_of(st.st_mode) + ", not a regular file");
  const int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

ReplacingFile::ReplacingFile(std::filesystem::path target, std::string temp, UniqueFd fd)
    : target_(std::move(target)), temp_(std::move(temp)), fd_(std::move(fd)) {}

ReplacingFile::ReplacingFile(ReplacingFile&& other) noexcept
    : target_(std::move(other.target_)), temp_(std::exchange(other.temp_, {})), fd_(std::move(other.fd_)) {}

ReplacingFile::~ReplacingFile() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

Result<ReplacingFile> ReplacingFile::create(const std::filesystem::path& target) {
  // What is there is replaced only when it is a file or a link: a device node, a FIFO or a socket a user
  // names (/dev/null, a pipe to a reader) is not a file to swap for another.
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return fail(target.string() + " is " + kind_of(st.st_mode) + ", not a regular file: it is not replaced");
  // mkostemp: O_CREAT | O_EXCL (an existing name, a link included, is never opened) under six random
  // characters, retried on a collision.
  std::string temp = target.string() + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd.valid()) return fail("cannot create a file beside " + target.string() + ": " + errno_text(errno));
  return ReplacingFile(target, std::move(temp), std::move(fd));
}

Status ReplacingFile::write(std::string_view bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write: " + errno_text(n < 0 ? errno : EIO));
    done += static_cast<std::size_t>(n);
  }
  return ok();
}

Status ReplacingFile::commit() {
  if (::fchmod(fd_.get(), 0644 & ~current_umask()) != 0) return fail("chmod: " + errno_text(errno));
  if (::fsync(fd_.get()) != 0) return fail("fsync: " + errno_text(errno));
  if (fd_.close() != 0) return fail("close: " + errno_text(errno));
  if (::rename(temp_.c_str(), target_.c_str()) != 0) return fail("rename: " + errno_text(errno));
  temp_.clear();
  return ok();
}

}  // namespace kiln::detail
