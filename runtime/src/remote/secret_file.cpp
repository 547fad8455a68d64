// Reading a secret's file (remote/secret_file.hpp).
#include "remote/secret_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::detail {

Result<SecretText> read_secret_file(const std::string& path, const std::string& origin, const std::string& use,
                                    std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return fail("cannot open " + origin + ": " + std::strerror(errno));
  SecretText out;
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (stated && S_ISREG(st.st_mode) && st.st_size <= static_cast<off_t>(max_bytes)) {
    out.text.resize(static_cast<std::size_t>(st.st_size));
    const ssize_t got = ::read(fd, out.text.data(), out.text.size());
    out.text.resize(got < 0 ? 0 : static_cast<std::size_t>(got));
  }
  ::close(fd);
  if (!stated || !S_ISREG(st.st_mode)) return fail(origin + " is not a regular file");
  if (st.st_size > static_cast<off_t>(max_bytes))
    return fail(origin + " holds " + std::to_string(st.st_size) + " bytes: is it the right file? (at most " +
                std::to_string(max_bytes) + ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || st.st_uid != ::geteuid())
    return fail(origin + " is not yours, or group or others can write it: chmod 600 it (as its owner)");
  if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0)
    out.warning = origin + " is readable by group or others, yet it lets whoever reads it " + use + ": chmod 600 " + path;
  return out;
}

}  // namespace kiln::detail
