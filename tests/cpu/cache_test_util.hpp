// What the disk-cache tests share: temp dirs, sample keys and entries, forked children.
#pragma once

#include <kiln/cache.hpp>

#include "base/settings.hpp"  // reread_settings
#include "fake_cubin.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kiln::test {

// A fresh directory under /tmp, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/kiln-cache-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    // Tests make directories read-only; give them back to the owner so everything can be removed.
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ignored);
    for (auto it = std::filesystem::recursive_directory_iterator(path_, ignored);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ignored)) {
      if (it->is_directory(ignored) && !it->is_symlink(ignored))
        std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ignored);
    }
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Waits (at most `within`, 30 s unless given, polling every 5 ms) until `done` says so; returns what it
// says last.
template <typename F>
bool eventually(F&& done, std::chrono::milliseconds within = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return done();
}

// A configuration whose root is `root`, with the default cap unless given.
inline CacheConfig config_at(const std::filesystem::path& root, std::uint64_t max_bytes = std::uint64_t{1} << 30) {
  CacheConfig c;
  c.dir = root;
  c.max_bytes = max_bytes;
  return c;
}

inline std::filesystem::path entries_dir(const std::filesystem::path& root) {
  std::string name = "v";  // not "v" + to_string(): g++ 12 then warns falsely (-Wrestrict)
  name += std::to_string(kCacheFormatVersion);
  return root / name;
}

// Where the entry of `key` lives in the cache at `root`.
inline std::filesystem::path entry_path(const std::filesystem::path& root, const CacheKey& key) {
  return entries_dir(root) / (key.hex + ".kiln");
}

inline CacheKey sample_key(int n, unsigned arch = 90) {
  CacheKeyFields f;
  f.registry = "tests";
  f.unit = "unit_" + std::to_string(n);
  f.source_digest = std::string(64, 'a');
  f.arch = arch;
  f.nvrtc = "13.0";
  f.nvjitlink = "13.0";
  f.cccl = "3.0.1";
  return CacheKey::from(f);
}

// Bytes that zstd cannot shrink much, so entries have a predictable size on disk.
inline std::string noise(std::size_t size, std::uint64_t seed) {
  std::string out(size, '\0');
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x >> 24);
  }
  return out;
}

// A valid entry for sample_key(n, arch): two kernels, and `code_bytes` of incompressible code.
inline CacheEntry sample_entry(int n, unsigned arch = 90, std::size_t code_bytes = 1024) {
  CacheEntry e;
  e.arch = arch;
  const std::string suffix = std::to_string(n);
  e.kernels = {{"k" + suffix, "_Z2k" + suffix + "v"}, {"scan" + suffix, "scan" + suffix}};
  e.options = "-std=c++17\n-lineinfo";
  e.compiler = "nvrtc 13.0 + nvjitlink 13.0";
  e.cubin = fake_cubin(arch, {e.kernels[0].lowered, e.kernels[1].lowered}, noise(code_bytes, static_cast<std::uint64_t>(n)));
  return e;
}

inline bool same_entry(const CacheEntry& a, const CacheEntry& b) {
  const auto same_kernels = std::equal(a.kernels.begin(), a.kernels.end(), b.kernels.begin(), b.kernels.end(),
                                       [](const CachedKernel& x, const CachedKernel& y) {
                                         return x.name == y.name && x.lowered == y.lowered;
                                       });
  const auto same_parts = std::equal(a.parts.begin(), a.parts.end(), b.parts.begin(), b.parts.end(),
                                     [](const CachedImage& x, const CachedImage& y) {
                                       return x.cubin == y.cubin && x.kernels == y.kernels;
                                     });
  return a.arch == b.arch && same_kernels && a.options == b.options && a.compiler == b.compiler && a.cubin == b.cubin &&
         same_parts;
}

// sample_entry(n) as a unit compiled in two parts: its second kernel alone, then its first (each part's
// kernels in any order the pool put them).
inline CacheEntry sample_parted_entry(int n, unsigned arch = 90, std::size_t code_bytes = 1024) {
  CacheEntry e = sample_entry(n, arch, code_bytes);
  e.cubin.clear();
  e.parts = {{fake_cubin(arch, {e.kernels[1].lowered}, noise(code_bytes, static_cast<std::uint64_t>(n) + 1)), {1}},
             {fake_cubin(arch, {e.kernels[0].lowered}, noise(code_bytes, static_cast<std::uint64_t>(n) + 2)), {0}}};
  return e;
}

// A file's permission bits (with set-id and sticky), or a value no test expects when it cannot be read.
inline mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : static_cast<mode_t>(-1);
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file of `size` bytes that starts with `head` and is a hole after it (no disk space used).
inline void sparse_file(const std::filesystem::path& path, std::string_view head, std::uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const bool made = fd >= 0 && ::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()) &&
                    ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0) ::close(fd);
  if (!made) throw std::runtime_error("cannot make the sparse file " + path.string());
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Names of the files in `dir` that end with `suffix` ("" for all), sorted.
inline std::vector<std::string> files_in(const std::filesystem::path& dir, std::string_view suffix = {}) {
  std::vector<std::string> names;
  std::error_code ignored;
  for (const auto& e : std::filesystem::directory_iterator(dir, ignored)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(suffix)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::vector<std::string> temp_and_lock_files(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& name : files_in(dir)) {
    if (name.find(".tmp.") != std::string::npos || name.ends_with(".lock")) names.push_back(name);
  }
  return names;
}

// Checks in a forked child, where doctest's assertions would be lost: prints the failure, counts it.
class ChildChecks {
 public:
  void expect(bool ok, const std::string& what) {
    if (ok) return;
    std::fprintf(stderr, "child %d: FAILED: %s\n", static_cast<int>(::getpid()), what.c_str());
    ++failures_;
  }
  int exit_code() const { return failures_ == 0 ? 0 : 1; }

 private:
  int failures_ = 0;
};

// Runs `body` in a forked child and returns its exit status (0 = all its checks passed), or -signal.
inline int run_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: exception: %s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(code);  // no atexit handlers or doctest reports from the child
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// For a forked child that must feel file modes: root writes anywhere whatever the mode, so as root it
// hands the tree under `top` to nobody (uid 65534) and becomes nobody, whose own the tree then is (the
// cache refuses a directory of another user's). Otherwise nothing is needed. False if that failed.
inline bool become_owner_of_as_nobody(const std::filesystem::path& top) {
  if (::geteuid() != 0) return true;
  constexpr uid_t nobody = 65534;
  for (const auto& e : std::filesystem::recursive_directory_iterator(top)) {
    if (::lchown(e.path().c_str(), nobody, nobody) != 0) return false;
  }
  if (::chown(top.c_str(), nobody, nobody) != 0) return false;
  return ::setgroups(0, nullptr) == 0 && ::setgid(nobody) == 0 && ::setuid(nobody) == 0;
}

// Sets (or, with nullptr, unsets) a setting's environment variable and has kiln read its settings again,
// as a new process would: kiln reads them once per process (base/settings.hpp).
inline void set_setting(const char* name, const char* value) {
  if (value != nullptr) ::setenv(name, value, 1);
  else ::unsetenv(name);
  kiln::detail::reread_settings();
}

// Sets a setting's environment variable for a scope (or unsets it with nullopt), then restores it; kiln
// reads its settings again at both ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(old_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const std::optional<std::string>& value) { set_setting(name_, value ? value->c_str() : nullptr); }
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace kiln::test
