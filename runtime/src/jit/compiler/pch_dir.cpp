// Each process's private directory for NVRTC's PCH files (jit/compiler/pch_dir.hpp).
#include "jit/compiler/pch_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <vector>

namespace kiln::detail {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLockFile = "lock";
// A directory without its lock file is one whose maker died between the two steps, or is taking them now.
constexpr auto kUnlockedGrace = std::chrono::minutes(1);
// PCH files written straight into the base directory, as kiln did before private directories: garbage
// of ~170 MiB each, unless a process of an older kiln still runs on them.
constexpr auto kLooseFileAge = std::chrono::hours(1);

// One of this process's directories.
struct Dir {
  std::string base;  // the requests' pch_dir
  fs::path path;     // <base>/<pid>.<random>
  int fd = -1;       // the directory, open: -pch-dir names it /proc/self/fd/<fd>; -1: no directory
  int lock = -1;     // <path>/lock, flock'ed for as long as the process lives
  pid_t owner = 0;
};

struct Dirs {
  std::mutex mutex;
  std::vector<Dir> dirs;

  // This process's directories (a forked child's own, never its parent's). Under `mutex`.
  void remove_own() {
    for (Dir& d : dirs) {
      if (d.owner != ::getpid() || d.fd < 0) continue;
      std::error_code ignored;
      fs::remove_all(d.path, ignored);
      ::close(d.lock);
      ::close(d.fd);
      d.fd = -1;
    }
  }
  ~Dirs() { remove_own(); }  // at a normal exit
};

Dirs& dirs() {
  static Dirs instance;
  return instance;
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

bool older_than(const fs::path& path, std::chrono::seconds age) {
  std::error_code ec;
  const auto written = fs::last_write_time(path, ec);
  return !ec && fs::file_time_type::clock::now() - written > age;
}

// "<pid>.<hex>", as make_dir names them.
bool is_private_dir_name(const std::string& name) {
  const auto dot = name.find('.');
  return dot != std::string::npos && dot > 0 && dot + 1 < name.size() &&
         name.find_first_not_of("0123456789") == dot &&
         name.find_first_not_of("0123456789abcdef", dot + 1) == std::string::npos;
}

// Directories of processes that are gone (nobody holds their lock), and loose files of older kilns.
void remove_stale(const fs::path& base) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(base, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path path = it->path();
    const std::string name = path.filename().string();
    std::error_code ignored;
    if (it->is_directory(ignored) && !it->is_symlink(ignored) && is_private_dir_name(name)) {
      const int lock = ::open((path / kLockFile).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
      if (lock < 0) {
        if (errno == ENOENT && older_than(path, kUnlockedGrace)) fs::remove_all(path, ignored);
        continue;
      }
      if (::flock(lock, LOCK_EX | LOCK_NB) == 0) fs::remove_all(path, ignored);  // its process is gone
      ::close(lock);
    } else if (it->is_regular_file(ignored) && name.ends_with(".pch") && older_than(path, kLooseFileAge)) {
      fs::remove(path, ignored);
    }
  }
}

std::string random_hex() {
  std::random_device device;
  char text[17];
  std::snprintf(text, sizeof text, "%08x%08x", device(), device());
  return text;
}

// A new directory of this process's under `base`, locked and open. False, with `problem`, on failure.
bool make_dir(const fs::path& base, Dir& d, std::string& problem) {
  d.path = base / (std::to_string(::getpid()) + "." + random_hex());
  if (::mkdir(d.path.c_str(), 0700) != 0) return problem = errno_text("creating " + d.path.string()), false;
  d.lock = ::open((d.path / kLockFile).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (d.lock < 0 || ::flock(d.lock, LOCK_EX | LOCK_NB) != 0) {
    problem = errno_text("locking " + (d.path / kLockFile).string());
    if (d.lock >= 0) ::close(d.lock);
    std::error_code ignored;
    fs::remove_all(d.path, ignored);
    return false;
  }
  d.fd = ::open(d.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0) {
    problem = errno_text("opening " + d.path.string());
    ::close(d.lock);
    std::error_code ignored;
    fs::remove_all(d.path, ignored);
    return false;
  }
  d.owner = ::getpid();
  return true;
}

// What -pch-dir says for `d`: the descriptor's name, the same in every process, where /proc has it.
std::string option_of(const Dir& d) {
  if (d.fd < 0) return {};
  const std::string by_descriptor = "/proc/self/fd/" + std::to_string(d.fd);
  return ::access(by_descriptor.c_str(), W_OK) == 0 ? by_descriptor : d.path.string();
}

}  // namespace

std::string private_pch_dir(const std::string& base, std::string& log) {
  if (base.empty()) return {};
  Dirs& all = dirs();
  const std::lock_guard lock(all.mutex);
  for (const Dir& d : all.dirs)
    if (d.base == base) return option_of(d);

  Dir d;
  d.base = base;
  std::string problem;
  std::error_code ec;
  if (!fs::is_directory(base, ec)) {
    fs::create_directories(base, ec);
    if (!ec) fs::permissions(base, fs::perms::owner_all, ec);
    if (ec) problem = "cannot create " + base + ": " + ec.message();
  }
  if (problem.empty()) {
    remove_stale(base);
    make_dir(base, d, problem);
  }
  if (!problem.empty()) {
    log += "kiln: compiling without a precompiled header: " + problem + "\n";
    d.fd = -1;  // and not again for this base
  }
  all.dirs.push_back(d);
  return option_of(d);
}

void remove_private_pch_dirs() {
  Dirs& all = dirs();
  const std::lock_guard lock(all.mutex);
  all.remove_own();
}

void private_pch_dirs_after_fork() {
  Dirs& all = dirs();
  // The parent forks only while it runs one thread (jit/worker/serve.hpp), so nobody held the mutex.
  const std::lock_guard lock(all.mutex);
  for (Dir& d : all.dirs) {
    if (d.fd < 0 || d.owner == ::getpid()) continue;
    ::close(d.lock);  // the parent's lock stays the parent's
    Dir mine;
    mine.base = d.base;
    std::string problem;
    if (!make_dir(d.base, mine, problem)) {
      ::close(d.fd);  // never the parent's directory: compile without a PCH
      d.fd = -1;
      continue;
    }
    // The parent's files, so that the PCH the child holds in memory finds its file. A link that fails
    // costs only warmth: NVRTC then builds that PCH again.
    std::error_code ec;
    for (auto it = fs::directory_iterator(d.path, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == kLockFile) continue;
      std::error_code ignored;
      fs::create_hard_link(it->path(), mine.path / it->path().filename(), ignored);
    }
    // Under the parent's descriptor number: the option string stays the same.
    if (::dup3(mine.fd, d.fd, O_CLOEXEC) < 0) {
      ::close(mine.fd);
      ::close(mine.lock);
      std::error_code ignored;
      fs::remove_all(mine.path, ignored);
      ::close(d.fd);
      d.fd = -1;
      continue;
    }
    ::close(mine.fd);
    mine.fd = d.fd;
    d = mine;
  }
}

}  // namespace kiln::detail
