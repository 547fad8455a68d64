// An object store (HTTP or S3) with a Redis in front of it: entries read through Redis (a miss there is
// asked of the object store, and a hit there copied into Redis), published to both; leases on Redis only,
// whose SET NX is atomic whatever the object store honours. Either failing is the store's failure (the
// breaker stops asking both for retry_ms).
#pragma once

#include <kiln/remote.hpp>

#include <chrono>
#include <memory>

namespace kiln::detail {

// `ttl`: what an entry copied into Redis on a read expires after (the tier's ttl_s).
std::unique_ptr<RemoteStore> make_tiered_store(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects,
                                               std::chrono::milliseconds ttl);

}  // namespace kiln::detail
