// What the rest of the runtime asks of the remote tier: its step in the chain, which remote cache a
// registry uses, and the fleet-wide single-flight the JIT's build goes through.
#pragma once

#include "chain/store.hpp"
#include "chain/tier.hpp"

#include <kiln/cache.hpp>
#include <kiln/registry.hpp>
#include <kiln/remote.hpp>

#include <functional>
#include <memory>

namespace kiln::detail {

// The remote tier's step (chain/tier.hpp): the fleet's entry, verified, kept on the local disk too.
TierStep remote_tier();

// The registry's remote cache: its option's, else the process-wide one; nullptr with use_remote off.
RemoteCache* remote_of(const RegistryOptions& options);

struct FleetBuild {
  CacheEntry entry;
  bool from_remote = false;  // another machine built it: fetched from the remote cache, not built here
};

// `build()` once fleet-wide. Without a usable remote (nullptr, off, or its breaker open) it is just
// build(). Otherwise: the remote's entry if another machine published it; else this process takes the
// key's lease (renewed while it builds), builds, publishes and releases it; or, when another machine
// holds the lease, waits for its entry — polling, at most lease_wait, after which it builds itself. A
// read-only remote never takes a lease or publishes, but waits on one another holds. build()'s
// exceptions propagate (the lease is released first); the store's failures never do.
// The remote cache as a store a build goes through: its claim is build_once_in_fleet's steps before build().
std::unique_ptr<UnitStore> fleet_store(RemoteCache& remote);

FleetBuild build_once_in_fleet(RemoteCache* remote, const CacheKey& key, const std::function<CacheEntry()>& build);

}  // namespace kiln::detail
