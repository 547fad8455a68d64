// What kiln's own code asks of a DiskCache beyond its public API: loads and builds that check an entry
// serves the unit it is for, and stores and builds that say why an entry was not kept.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"

#include <functional>
#include <optional>

namespace kiln::detail {

// Whether an entry found under a key may serve what asked for it (disk/unit_key.hpp's entry_serves_unit:
// the key covers the source, so an entry that does not is foreign). Empty: any valid entry serves.
using EntryCheck = std::function<Status(const CacheEntry&)>;

// What get_or_build did, for callers that report it (kiln precompile).
struct BuildReport {
  bool built = false;    // build() ran here: the cache did not have the entry
  Status stored = ok();  // when built: published to the cache, or why not (the directory, the cap, ...)
};

// DiskCache::load, with `check`: an entry that decodes but fails it is counted, deleted and a miss.
std::optional<CacheEntry> load_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check);
// load_checked for a read ahead (registry/prefetch.cpp): neither a miss nor a hit is counted (the tier
// chain counts its own miss when it asks; count_hit counts the hit once the entry serves a get()). A bad
// entry is deleted and counted as load_checked does.
std::optional<CacheEntry> read_ahead_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check);
void count_hit(DiskCache& cache);
// DiskCache::store, saying why the entry was not stored (also warned once per kind, and counted).
Status store_entry(DiskCache& cache, const CacheKey& key, const CacheEntry& entry);
// DiskCache::get_or_build, with `check` on every entry found, before and after the lock (one failing it
// is deleted and built again), and on the entry built (one failing it is Error(compile), not stored).
CacheEntry get_or_build_checked(DiskCache& cache, const CacheKey& key, const std::function<CacheEntry()>& build,
                                const EntryCheck& check, BuildReport& report);

}  // namespace kiln::detail
