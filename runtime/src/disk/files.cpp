// Names of cache files, and reading, publishing and deleting them relative to the cache directory's descriptor.
#include "disk/files.hpp"

#include "base/private_dir.hpp"
#include "base/unique_fd.hpp"
#include "chain/entry.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

namespace kiln::detail {

namespace {

constexpr std::string_view kEntrySuffix = ".kiln";
constexpr std::string_view kTempInfix = ".kiln.tmp.";
constexpr std::string_view kLockSuffix = ".lock";
constexpr std::string_view kPchSuffix = ".pch";
constexpr std::string_view kPchSumSuffix = ".pch.sum";
constexpr std::string_view kTempMark = ".tmp.";

// Whether `name` ends with `suffix` after a non-empty stem; the stem then.
std::optional<std::string_view> stem_before(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  return name.substr(0, name.size() - suffix.size());
}

std::string errno_text(int error) { return std::strerror(error); }

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
  // <name>.tmp.<pid>.<random>, <name> one of the kinds below: the first ".tmp." after a known suffix.
  for (std::size_t at = name.find(kTempMark); at != std::string_view::npos; at = name.find(kTempMark, at + 1)) {
    const std::string_view named = name.substr(0, at);
    const auto stem = stem_before(named, kEntrySuffix) ? stem_before(named, kEntrySuffix)
                      : stem_before(named, kPchSumSuffix) ? stem_before(named, kPchSumSuffix)
                                                          : stem_before(named, kPchSuffix);
    if (!stem) continue;
    const std::string_view rest = name.substr(at + kTempMark.size());
    const auto dot = rest.find('.');
    pid_t pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec == std::errc() && dot != std::string_view::npos && end == rest.data() + dot && pid > 0) {
      f.kind = CacheFileKind::temp;
      f.stem = *stem;
      f.writer = pid;
    }
    return f;
  }
  const std::pair<std::string_view, CacheFileKind> kinds[] = {
      {kEntrySuffix, CacheFileKind::entry},
      {kLockSuffix, CacheFileKind::lock},
      {kPchSumSuffix, CacheFileKind::pch_sum},
      {kPchSuffix, CacheFileKind::pch},
  };
  for (const auto& [suffix, kind] : kinds) {
    if (const auto stem = stem_before(name, suffix)) {
      f.kind = kind;
      f.stem = *stem;
      break;
    }
  }
  return f;
}

namespace {

// Reads up to `size` bytes, retrying short reads and EINTR: how many arrived before the end, or -1 (errno).
ssize_t read_full(int fd, char* buffer, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buffer + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

EntryFile read_entry_fd(int fd, const std::filesystem::path& shown, bool head_only) {
  EntryFile f;
  if (::fstat(fd, &f.st) != 0) {
    f.status = EntryFile::Status::unreadable;
    f.problem = "fstat: " + errno_text(errno);
    return f;
  }
  f.opened = true;
  f.status = EntryFile::Status::bad;
  if (S_ISDIR(f.st.st_mode)) {
    f.problem = "a directory, not an entry file";
    return f;
  }
  if (!S_ISREG(f.st.st_mode)) {
    f.problem = "not a regular file";
    return f;
  }
  if (const Status mine = vet_private_file(f.st, shown); !mine) {
    f.status = EntryFile::Status::refused;
    f.problem = mine.error();
    return f;
  }
  // The header first: until it checks out, a file of any size costs these 64 bytes.
  char header[kEntryHeaderSize];
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(sizeof header, static_cast<std::uint64_t>(f.st.st_size)));
  const ssize_t got = read_full(fd, header, want);
  if (got < 0) {
    f.status = EntryFile::Status::unreadable;
    f.problem = "read: " + errno_text(errno);
    return f;
  }
  const auto sizes = read_entry_header(std::string_view(header, static_cast<std::size_t>(got)));
  if (!sizes) {
    f.problem = sizes.error();
    return f;
  }
  if (const Status whole = check_entry_size(*sizes, static_cast<std::uint64_t>(f.st.st_size)); !whole) {
    f.problem = whole.error();
    return f;
  }
  // Then exactly what it promises (or its key text alone), which the caps bound (chain/entry.hpp).
  f.bytes.resize(static_cast<std::size_t>(head_only ? kEntryHeaderSize + sizes->key_text : sizes->file()));
  std::memcpy(f.bytes.data(), header, sizeof header);
  const ssize_t rest = read_full(fd, f.bytes.data() + sizeof header, f.bytes.size() - sizeof header);
  if (rest < 0) {
    f.status = EntryFile::Status::unreadable;
    f.problem = "read: " + errno_text(errno);
    f.bytes.clear();
    return f;
  }
  // Entries are never rewritten in place, so a size change means something else is writing here.
  if (static_cast<std::size_t>(rest) != f.bytes.size() - sizeof header) {
    f.problem = "shrank while being read";
    f.bytes.clear();
    return f;
  }
  f.status = EntryFile::Status::ok;
  return f;
}

EntryFile read_entry_file(int dir, const std::string& name, const std::filesystem::path& shown, bool head_only) {
  // O_NOFOLLOW: a symlink is refused (ELOOP), never followed; O_NONBLOCK: a FIFO cannot hang the reader.
  const UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    EntryFile f;
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
  return read_entry_fd(fd.get(), shown, head_only);
}

bool remove_bad_entry(int dir, const std::string& name, const EntryFile& file) {
  struct stat now {};
  if (::fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (S_ISDIR(now.st_mode)) return false;  // a user's directory: never kiln's to delete
  // A writer may have renamed a good entry over the bad one since it was read: delete only what was read.
  if (file.opened && !same_file(now, file.st)) return false;
  return ::unlinkat(dir, name.c_str(), 0) == 0;
}

bool remove_cache_file(int dir, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) return false;
  return ::unlinkat(dir, name.c_str(), 0) == 0;
}

void touch_mtime(int dir, const std::string& name) {
  const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ::utimensat(dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);  // best effort: a read-only dir still serves
}

Status publish_file(int dir, const std::filesystem::path& shown, std::string_view hex, std::string_view bytes) {
  return publish_named(dir, shown, entry_file_name(hex), bytes);
}

Status publish_named(int dir, const std::filesystem::path& shown, const std::string& final_name, std::string_view bytes) {
  // <name>.kiln.tmp.<pid>.<random>: a temp file prune removes when its writer is gone.
  const std::string temp = temp_file_name(final_name.ends_with(kEntrySuffix)
                                              ? std::string_view(final_name).substr(0, final_name.size() - kEntrySuffix.size())
                                              : std::string_view(final_name));
  UniqueFd fd(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return detail::fail("creating " + (shown / temp).string() + ": " + errno_text(errno));
  const auto failed_at = [&](std::string_view step, int error) {
    ::unlinkat(dir, temp.c_str(), 0);
    return detail::fail(std::string(step) + " " + (shown / temp).string() + ": " + errno_text(error));
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
  if (::renameat(dir, temp.c_str(), dir, final_name.c_str()) != 0) return failed_at("renaming", errno);
  return ok();
}

namespace {

struct DirCloser {
  void operator()(DIR* d) const noexcept { ::closedir(d); }
};

}  // namespace

std::vector<ScannedFile> scan_cache_dir(int dir) {
  std::vector<ScannedFile> files;
  const int own = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (own < 0) return files;
  const std::unique_ptr<DIR, DirCloser> d(::fdopendir(own));
  if (!d) {
    ::close(own);
    return files;
  }
  while (const dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    const auto kind = classify_cache_file(name);
    if (kind.kind == CacheFileKind::other) continue;
    ScannedFile f{std::string(name), kind.kind, kind.writer, {}};
    // Gone since readdir (another process pruned it): nothing to count.
    if (::fstatat(dir, e->d_name, &f.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace kiln::detail
