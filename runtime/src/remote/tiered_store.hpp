// An object store (HTTP or S3) with a Redis in front of it: entries read through Redis (a miss there is
// asked of the object store, and a hit there copied into Redis), published to both; leases on Redis,
// whose SET NX is atomic whatever the object store honours. Each store has its own circuit breaker: one
// that fails is reported (StoreFailed) and left alone for retry_ms while the other serves (leases as
// objects while Redis is out); only a call neither can answer throws, the whole tier's failure.
#pragma once

#include <kiln/remote.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::detail {

// Told of a call one store of the pair failed (its where(), the call, why) while the other was asked.
using StoreFailed = std::function<void(const std::string& store, std::string_view call, const std::string& why)>;

// `ttl`: what an entry copied into Redis on a read expires after (the tier's ttl_s); `retry_after`: how
// long a store that failed is not asked (retry_ms).
std::unique_ptr<RemoteStore> make_tiered_store(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects,
                                               std::chrono::milliseconds ttl, std::chrono::milliseconds retry_after,
                                               StoreFailed failed);

}  // namespace kiln::detail
