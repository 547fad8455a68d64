// What kiln's own code asks of a DiskCache beyond its public API: loads and builds that check an entry
// serves the unit it is for, and stores and builds that say why an entry was not kept.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"
#include "chain/store.hpp"

#include <functional>
#include <memory>
#include <optional>

namespace kiln::detail {

// DiskCache::load, with `check`: an entry that decodes but fails it is counted, deleted and a miss.
// The miss says why: absent, unreadable, refused, corrupt, foreign, or the cache not in use.
Result<CacheEntry> load_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check);
// load_checked for a read ahead (registry/prefetch.cpp): neither a miss nor a hit is counted (the tier
// chain counts its own miss when it asks; count_hit counts the hit once the entry serves a get()). A bad
// entry is deleted and counted as load_checked does.
Result<CacheEntry> read_ahead_checked(DiskCache& cache, const CacheKey& key, const EntryCheck& check);
void count_hit(DiskCache& cache);
// DiskCache::store, saying why the entry was not stored (also warned once per kind, and counted).
Status store_entry(DiskCache& cache, const CacheKey& key, const CacheEntry& entry);
// The disk cache as a store a build goes through (chain/store.hpp): every entry it finds passes `check`
// (one that fails is deleted and built again); its hold is the key's lock file, and publishing stores.
std::unique_ptr<UnitStore> disk_store(DiskCache& cache);

}  // namespace kiln::detail
