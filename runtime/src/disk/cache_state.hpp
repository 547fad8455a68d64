// DiskCache's private state, shared by the files that implement it, and kiln's own access to it.
#pragma once

#include <kiln/cache.hpp>

#include "base/private_dir.hpp"
#include "base/warn_once.hpp"
#include "disk/directory.hpp"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

namespace detail {

// Lives in detail (DiskCache::State is private) so that helper functions of the cache's files can take it.
struct CacheState {
  CacheConfig config;
  std::filesystem::path entries;  // <config.dir>/v<format version>, for messages
  Reason unusable;                // why not usable (code cache); empty when usable

  std::atomic<std::uint64_t> hits{0}, misses{0}, corrupt{0}, stores{0}, store_failures{0}, evictions{0};
  WarnOnce warnings;

  void warn(std::string_view kind, const std::string& message) { warnings.warn(kind, message); }

  // The version directory now, every file of the cache opened relative to it (disk/directory.hpp). The
  // first open walks the path under the private rule; later ones reuse that descriptor (a dup) after an
  // fstat shows it still follows the rule and was not deleted, and a stat of `entries` that the path
  // still names it; otherwise they walk again (disk/cache.cpp).
  Result<std::optional<PrivateDir>> open(bool create) const;

 private:
  mutable std::mutex dir_mutex_;
  mutable std::optional<PrivateDir> dir_;  // the version directory as last walked to
};

struct CacheAccess {
  static CacheState& of(DiskCache& cache);
};

}  // namespace detail

struct DiskCache::State : detail::CacheState {};

inline detail::CacheState& detail::CacheAccess::of(DiskCache& cache) { return *cache.state_; }

}  // namespace kiln
