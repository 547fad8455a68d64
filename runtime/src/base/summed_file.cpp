// Files with a sum beside them: publishing and verifying (base/summed_file.hpp).
#include "base/summed_file.hpp"

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kiln::detail {

namespace {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// The SHA-256 (hex) and size of the file at `path`, read in pieces.
Result<std::pair<std::string, std::uint64_t>> hash_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return fail(errno == ENOENT ? std::string() : errno_text("opening " + path.string()));
  SHA256_CTX context;
  SHA256_Init(&context);
  std::string buffer(1 << 20, '\0');
  std::uint64_t size = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errno_text("reading " + path.string());
      ::close(fd);
      return fail(why);
    }
    if (n == 0) break;
    SHA256_Update(&context, buffer.data(), static_cast<std::size_t>(n));
    size += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  unsigned char digest[32];
  SHA256_Final(digest, &context);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const unsigned char byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 0xf];
  }
  return std::make_pair(hex, size);
}

void remove_quietly(const std::filesystem::path& path) { ::unlink(path.c_str()); }

}  // namespace

std::filesystem::path sum_path(const std::filesystem::path& file) { return file.string() + ".sum"; }

std::filesystem::path summed_temp_path(const std::filesystem::path& final_path) {
  std::uint64_t random = 0;
  if (getrandom(&random, sizeof random, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof random)) random = 0;
  return final_path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(random);
}

Status publish_summed(const std::filesystem::path& temp, const std::filesystem::path& final_path) {
  const auto hashed = hash_file(temp);
  const std::filesystem::path sum_temp = summed_temp_path(sum_path(final_path));
  const auto failed = [&](std::string why) {
    remove_quietly(temp);
    remove_quietly(sum_temp);
    return fail(std::move(why));
  };
  if (!hashed) return failed(hashed.error().empty() ? "no file " + temp.string() : hashed.error());
  ::chmod(temp.c_str(), 0600);  // as private as the cache's entries (NVRTC creates it under the umask)
  {
    // 0600 whatever the umask, as every file of the cache.
    const int fd = ::open(sum_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return failed(errno_text("creating " + sum_temp.string()));
    const std::string line = hashed->first + ' ' + std::to_string(hashed->second) + '\n';
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    const std::string why = errno_text("writing " + sum_temp.string());
    if (::close(fd) != 0 || !written) return failed(why);
  }
  // The sum first: a reader that finds the new file finds its sum; one that finds the old file with the
  // new sum deletes both, and compiles without.
  if (::rename(sum_temp.c_str(), sum_path(final_path).c_str()) != 0) return failed(errno_text("renaming " + sum_temp.string()));
  if (::rename(temp.c_str(), final_path.c_str()) != 0) return failed(errno_text("renaming " + temp.string()));
  return ok();
}

Status verify_summed(const std::filesystem::path& path) {
  std::ifstream in(sum_path(path));
  std::string want_hex;
  std::uint64_t want_size = 0;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return fail("");
  const auto reject = [&](const std::string& why) {
    remove_quietly(path);
    remove_quietly(sum_path(path));
    return fail(why);
  };
  if (!S_ISREG(st.st_mode)) return reject(path.string() + " is not a regular file");
  if (!(in >> want_hex >> want_size)) return reject(path.string() + " has no readable sum file");
  if (static_cast<std::uint64_t>(st.st_size) != want_size)
    return reject(path.string() + " is " + std::to_string(st.st_size) + " bytes, its sum says " + std::to_string(want_size));
  const auto hashed = hash_file(path);
  if (!hashed) return reject(hashed.error().empty() ? path.string() + " vanished" : hashed.error());
  if (hashed->first != want_hex) return reject(path.string() + ": SHA-256 differs from its sum");
  return ok();
}

}  // namespace kiln::detail
