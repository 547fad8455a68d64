// Creates the cache directory 0700 and refuses one that others could write.
#include "disk/directory.hpp"

#include <kiln/cache.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kiln::detail {

namespace {

// mkdir -p with mode 0700 for every directory it creates (the XDG spec asks the same of cache dirs).
std::string make_dirs(const std::filesystem::path& dir) {
  std::filesystem::path partial;
  for (const auto& part : dir) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) continue;
    const int error = errno;
    // EACCES or EROFS on a directory that exists is fine: a read-only cache still serves loads.
    struct stat st {};
    if (error == EEXIST || (::stat(partial.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) continue;
    return "cannot create " + partial.string() + ": " + std::strerror(error);
  }
  return {};
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Why `dir` must not hold cache entries, or empty. A directory others can write lets them plant a
// binary that kiln would hand to the driver; ssh refuses such a ~/.ssh for the same reason.
std::string vet(const std::filesystem::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "cannot use " + dir.string() + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "cannot use " + dir.string() + ": it is not a directory";
  if (st.st_uid != ::geteuid())
    return "refusing " + dir.string() + ": it is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + "); point KILN_CACHE_DIR at a directory of your own";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return "refusing " + dir.string() + ": group or others can write it (mode " + octal_mode(st.st_mode) +
           "); run `chmod go-w " + dir.string() + "`, or point KILN_CACHE_DIR at a private directory";
  return {};
}

std::filesystem::path entries_dir(const std::filesystem::path& root) {
  std::string version_dir = "v";
  version_dir += std::to_string(kCacheFormatVersion);
  return root / version_dir;
}

// vet() of the root, then of the version directory.
std::string vet_both(const std::filesystem::path& root, const std::filesystem::path& entries) {
  if (std::string why = vet(root); !why.empty()) return why;
  return vet(entries);
}

}  // namespace

CacheDir open_cache_dir(const std::filesystem::path& root) {
  CacheDir d;
  if (root.empty()) {
    d.refusal = "no cache directory: neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set";
    return d;
  }
  d.entries = entries_dir(root);
  d.refusal = make_dirs(d.entries);
  if (d.refusal.empty()) d.refusal = vet_both(root, d.entries);
  return d;
}

std::string unsafe_cache_dir(const std::filesystem::path& root) {
  const std::filesystem::path entries = entries_dir(root);
  struct stat st {};
  if (::stat(entries.c_str(), &st) != 0) return {};  // gone (or unreachable): every load misses anyway
  return vet_both(root, entries);
}

}  // namespace kiln::detail
