// The stores a built unit is kept in — the disk cache, the remote cache a fleet shares — behind one
// interface, so that the tiers that build (PTX, JIT) know none of them.
//
// A build claims the key in each store, fastest first, before it compiles: the disk cache's claim is a
// file lock (threads and processes sharing the directory build a key once), the remote cache's a lease
// (machines sharing the server build it once). A claim finds the entry instead when someone else built it
// meanwhile; else it holds until the build publishes to it, or, when the build fails, releases it, so
// that those waiting take over at once (docs/DESIGN.md, "A build, step by step").
#pragma once

#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/registry.hpp>  // Tier

#include <functional>
#include <memory>
#include <optional>

namespace kiln::detail {

// Whether an entry found under a key may serve what asked for it (chain/unit_key.hpp's entry_serves_unit:
// the key covers the source, so an entry that does not is foreign). Empty: any valid entry serves.
using EntryCheck = std::function<Status(const CacheEntry&)>;

// A store's hold on a key while this process builds it.
class StoreHold {
 public:
  virtual ~StoreHold() = default;  // releases the hold (a lock, a lease) without publishing
  // Keeps `entry` in the store, then releases the hold; why the store did not keep it, when it did not
  // (the store's failures are said once, as warnings, and never stop the build).
  virtual Status publish(const CacheEntry& entry) = 0;
};

// What a claim found: the entry someone else built, or the hold (null when the store cannot hold the key,
// as when it is not in use: then `held` says why, and the build goes on without it).
struct Claim {
  std::optional<CacheEntry> found;
  std::unique_ptr<StoreHold> hold;
  Status held = ok();
};

class UnitStore {
 public:
  virtual ~UnitStore() = default;
  virtual Tier tier() const noexcept = 0;  // disk or remote: where a found entry came from
  // The entry under `key` when the store has one that passes `check` (one that fails it is removed), else
  // a hold on the key; waits for another holder within the store's bound (lock_timeout, lease wait_ms).
  virtual Claim claim(const CacheKey& key, const EntryCheck& check) = 0;
};

}  // namespace kiln::detail
