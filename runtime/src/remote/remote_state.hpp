// RemoteCache's private state, and the steps the remote tier's files share: the circuit breaker around
// every call to the store, fetching a verified entry, publishing one.
#pragma once

#include "base/result.hpp"
#include "base/warn_once.hpp"
#include "remote/sealed_entry.hpp"
#include "remote/store_url.hpp"  // Expiry

#include <kiln/remote.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>

namespace kiln::detail {

struct RemoteState {
  RemoteSettings settings;
  std::unique_ptr<RemoteStore> store;  // null when not usable
  std::optional<FleetKey> key;
  Reason unusable;                     // why not usable (code remote); empty when usable
  std::string where;                   // the store and its mode, for messages
  Expiry expiry = Expiry::ttl;         // who expires its entries (a store brought by the user: ttl_s, given to put)

  // The circuit breaker: after a call that got no answer, no call until this steady_clock time (ns).
  std::atomic<std::int64_t> retry_at_ns{0};

  std::atomic<std::uint64_t> hits{0}, misses{0}, rejected{0}, errors{0}, skipped{0}, stores{0}, refused{0},
      too_large{0}, bytes_read{0}, bytes_written{0}, leases{0}, lease_waits{0}, lease_timeouts{0}, lease_wait_us{0};
  WarnOnce warnings;

  // Keys whose value in the store was rejected here: the entry rebuilt for one is published over it
  // (RemoteStore::put_over), where a store that writes once would keep the bad one.
  std::mutex rejected_mutex;
  std::unordered_set<std::string> rejected_keys;

  bool usable() const noexcept { return store != nullptr; }
  void warn(std::string_view kind, const std::string& message) { warnings.warn(kind, message); }
};

// The store's keys for an entry and for its lease, under the fleet key's id: kiln:<key id>:entry:<hex>,
// kiln:<key id>:lease:<hex>. A machine with another key reads and writes only its own names, never the
// fleet's (it would replace the fleet's entries with ones the fleet rejects, and back).
std::string entry_key(const RemoteState& s, const CacheKey& key);
std::string lease_key(const RemoteState& s, const CacheKey& key);

// What to do about a store that refuses writes, by its words: a full Redis (OOM) needs memory or an eviction
// policy, a read-only replica the primary's address.
std::string refusal_hint(std::string_view refusal);

// Remembers that the store's value for `key` was rejected (at most a few thousand keys are kept).
void remember_rejected(RemoteState& s, const CacheKey& key);

// Whether the breaker is open now (a call failed less than retry_after ago); counts the call skipped.
bool skip_call(RemoteState& s);
// Counts a call that got no answer, warns once, and opens the breaker.
void record_failure(RemoteState& s, std::string_view call, const std::string& why);
// Counts a call that one store of a pair (`store`, a Redis beside an object store) failed while the other
// served, and warns once for that store; the pair's own breaker leaves that store alone for retry_after.
void record_store_failure(RemoteState& s, const std::string& store, std::string_view call, const std::string& why);

// Runs `call`, which calls into a store (one a user brought, maybe): whatever it throws, of any type, is why
// it failed, and goes no further.
template <typename Call>
Status store_call(Call&& call) {
  try {
    call();
    return ok();
  } catch (const std::exception& e) {
    return fail(e.what());
  } catch (...) {
    return fail("the store threw an exception that is not a std::exception");
  }
}

// `call()`'s value, or why there is none: the breaker was open, or the store threw (recorded above).
template <typename Call>
Result<std::invoke_result_t<Call&>> guarded(RemoteState& s, std::string_view what, Call&& call) {
  if (skip_call(s)) return fail("the remote cache " + s.where + " is not asked for a while after a failure");
  std::optional<std::invoke_result_t<Call&>> value;
  if (const Status done = store_call([&] { value.emplace(call()); }); !done) {
    record_failure(s, what, done.error());
    return fail("the remote cache " + s.where + " failed (" + std::string(what) + ": " + done.error() + ")");
  }
  return std::move(*value);
}

// A value fetched and verified: the sealed value, the entry file inside it, and the entry decoded.
struct RemoteEntry {
  std::string value;
  CacheEntry entry;
  std::string_view file() const noexcept { return std::string_view(value).substr(kSealOverhead); }
};

// The entry under `key`, its tag verified and then everything DiskCache::load checks; or why it is a
// miss. One that is there but fails a check is counted as rejected and warned about once; one that is
// not there is counted as a miss when `lookup` (a waiter's polls are not misses).
enum class Count { lookup, poll };
Result<RemoteEntry> fetch_entry(RemoteState& s, const CacheKey& key, Count count = Count::lookup);

// Publishes an entry file (as chain/entry.hpp encodes it) under `key`, sealed. Not in read-only mode, not
// when larger than max_value_bytes (counted). Whether the store took it.
bool publish_file(RemoteState& s, const CacheKey& key, std::string_view entry_file);
// The same for an entry, checked first as DiskCache::store checks one.
bool publish_entry(RemoteState& s, const CacheKey& key, const CacheEntry& entry);

}  // namespace kiln::detail
