// What a disk cache holds, read without loading an entry: each entry's key (registry, unit, architecture)
// and file, the precompiled headers beside them. For `kiln cache stats`, `cache list`, `info` and `why`.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace kiln::detail {

// One entry file whose header and key text check out (the frame is not read).
struct ListedEntry {
  CacheKey key;
  std::string registry, unit;  // the key text's fields
  std::uint64_t bytes = 0;     // the file's size
  std::time_t used = 0;        // its mtime: when it was last stored or loaded
};

struct Inventory {
  std::vector<ListedEntry> entries;    // by registry, unit, architecture, key
  std::uint64_t pch_files = 0;         // precompiled headers
  std::uint64_t pch_bytes = 0;         // their files and sums
  std::vector<std::string> unreadable; // "<file>: why": entry files whose header or key text does not check out
};

// The cache's entries and precompiled headers now: each entry file costs its header and key text (at most
// 64 KiB past a 64-byte header), whatever its size. Empty when the cache is not usable.
Inventory take_inventory(DiskCache& cache);

// The entry `listed` decoded and checked as DiskCache::load checks one, without marking it used; or why not.
Result<CacheEntry> read_listed(DiskCache& cache, const ListedEntry& listed);

// Which tier made an entry, from what it records: "ptx" (embedded PTX assembled for a newer GPU) or "jit".
std::string made_by(const CacheEntry& entry);

}  // namespace kiln::detail
