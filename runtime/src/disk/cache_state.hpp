// DiskCache's private state, shared by the files that implement it.
#pragma once

#include <kiln/cache.hpp>

#include "base/warn_once.hpp"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln {

namespace detail {

// Lives in detail (DiskCache::State is private) so that helper functions of the cache's files can take it.
struct CacheState {
  CacheConfig config;
  std::filesystem::path entries;  // <config.dir>/v<format version>
  std::string unusable;           // why not usable; empty when usable

  std::atomic<std::uint64_t> hits{0}, misses{0}, corrupt{0}, stores{0}, store_failures{0}, evictions{0};
  WarnOnce warnings;

  void warn(std::string_view kind, const std::string& message) { warnings.warn(kind, message); }

  std::filesystem::path path_of(const std::string& file_name) const { return entries / file_name; }
};

}  // namespace detail

struct DiskCache::State : detail::CacheState {};

}  // namespace kiln
