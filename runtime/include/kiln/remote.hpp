// The remote tier: a cache a fleet of machines shares (Redis, an HTTP(S) server, an S3 bucket, or a store
// you bring), between disk and JIT.
//
// On a disk miss the registry asks the remote cache; a hit is verified like a disk entry (the same entry
// format, the key re-checked) plus an HMAC-SHA-256 tag under the fleet's key, written to the local disk
// cache and loaded. A miss is compiled once fleet-wide: the first machine takes a lease in the store,
// compiles, publishes to its disk and the store, and releases; the others wait for the entry (bounded).
// A store that is down, slow, full or answers garbage costs one warning and a bounded wait per process;
// then kiln goes on without it for a while. docs/DESIGN.md, "The remote tier", has the contracts and the
// trust model.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/cache.hpp>
#include <kiln/cache_pack.hpp>  // EntryFilter
#include <kiln/error.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class RemoteCache;
namespace detail {
struct RemoteState;  // remote/remote_state.hpp: what the remote tier's files share
RemoteState& remote_state(RemoteCache& remote) noexcept;
}  // namespace detail

// A store's answer to a write: done; not done because another holds the lease (try_lease only); or
// refused by a store that is up but will not write now (full, a read-only replica), with its words.
struct RemoteReply {
  enum Kind { done, held, refused } kind = done;
  std::string refusal;
};

// What a store's get() throws when a value is under the key but cannot be one of kiln's (Redis: a value of
// another type, or one larger than the reply cap, max_bytes): a miss for that key, counted as rejected and
// replaced when the key is built and published again. Not a failure of the store: the breaker stays closed.
// A kiln::Error (remote), as everything a store throws should be.
struct RemoteBadValue : Error {
  explicit RemoteBadValue(const std::string& why) : Error(Errc::remote, why) {}
};

// What kiln asks of a shared store. Redis, HTTP(S) and S3 are built in (KILN_REMOTE_CACHE); another store
// implements this and is handed to RemoteCache. Called from several threads at once. A call that gets
// no answer from its store (down, timed out, garbage) throws kiln::Error(remote), saying why: kiln counts
// it, warns once, and stops asking for RemoteSettings::retry_after. Whatever else a store throws (another
// exception, even one that is not a std::exception) kiln takes as such a failure too: nothing a store
// throws reaches kiln's callers. Each call must end within the timeouts it was configured with: kiln never
// waits longer than its store lets it.
class RemoteStore {
 public:
  virtual ~RemoteStore() = default;
  // Where it is, for messages: "redis://10.0.0.5:6379/0".
  virtual std::string where() const = 0;
  // The value under `key`, or nullopt when there is none; RemoteBadValue for one that cannot be kiln's.
  virtual std::optional<std::string> get(const std::string& key) = 0;
  // Whether a value is under `key` (for plan(): nothing is transferred).
  virtual bool contains(const std::string& key) { return get(key).has_value(); }
  // Stores `value` under `key`, to expire after `ttl`: done or refused. A store may write once (the HTTP
  // and S3 stores: If-None-Match: *), keeping another machine's value for the key: done too.
  virtual RemoteReply put(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) = 0;
  // The same over whatever is under `key`: publishing an entry that replaces one rejected (altered, another
  // key's, not an entry). By default put().
  virtual RemoteReply put_over(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) {
    return put(key, value, ttl);
  }
  // Takes the lease `key` with `token` for `ttl` unless someone holds it (Redis: SET key token NX PX ttl):
  // done (taken), held, or refused. A lease that would outlive `ttl` (no expiry, or a longer one) was set
  // by no holder of this fleet's settings: it is taken over (done).
  virtual RemoteReply try_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) = 0;
  // Whether a lease is held under `key` that expires within `ttl` (a read-only machine waits only on such
  // a lease; one with no expiry or a longer one is not waited on).
  virtual bool lease_held(const std::string& key, std::chrono::milliseconds ttl) {
    (void)ttl;
    return contains(key);
  }
  // Extends the lease to `ttl` from now if `token` still holds it; false when it does not.
  virtual bool renew_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) = 0;
  // Gives the lease up if `token` still holds it.
  virtual void release_lease(const std::string& key, const std::string& token) = 0;
};

// How the remote tier behaves; each field can also be set in the URL's query (the name in brackets).
struct RemoteSettings {
  bool read_only = false;                              // [mode=ro]: never writes, never takes a lease
  std::chrono::milliseconds connect_timeout{200};      // [connect_timeout_ms]: the TCP connect (and DNS);
                                                       // 1000 for an HTTP(S) or S3 store left at 200 (TLS)
  std::chrono::milliseconds request_timeout{500};      // [timeout_ms]: one request, until its whole reply;
                                                       // 5000 for an HTTP(S) or S3 store left at 500
  std::chrono::seconds ttl{7 * 24 * 3600};             // [ttl_s]: entries expire in the store after this
  std::uint64_t max_value_bytes = std::uint64_t{8} << 20;  // [max_bytes]: larger entries are not shared, nor read
  std::chrono::milliseconds lease_ttl{10000};          // [lease_ms]: a lease's life; its holder renews it
                                                       // every third of it, so a dead holder frees it by then
  std::chrono::milliseconds lease_wait{120000};        // [wait_ms]: a waiter gives up and compiles itself
  std::chrono::milliseconds retry_after{30000};        // [retry_ms]: after a failure, no remote for this long
};

struct RemoteConfig {
  // redis://[[user]:password@]host[:port][/db][?name=value&...], https://host[:port]/path[?...] (or
  // http://), s3://bucket[/prefix][?region=R&endpoint=URL&...], or a redis:// URL and an https:// or s3://
  // one separated by a space (leases on Redis, entries read through it); empty or "off": no remote tier.
  std::string url;
  // The fleet's key, which tags and verifies every entry: at least 16 bytes (32 random ones are best).
  // Without one the remote tier is off (one warning): it could verify nothing.
  std::string fleet_key;
  std::filesystem::path fleet_key_file;  // read when fleet_key is empty
  // The HTTP(S) store's credential ("Bearer TOKEN", "Basic USER:PASSWORD" or a bare token), or an S3
  // store's keys (aws_access_key_id = ..., aws_secret_access_key = ...) where AWS_ACCESS_KEY_ID is unset.
  std::filesystem::path auth_file;
  RemoteSettings settings;               // the URL's query overrides these

  // KILN_REMOTE_CACHE (the URL), KILN_REMOTE_KEY_FILE or KILN_REMOTE_KEY (the fleet key),
  // KILN_REMOTE_AUTH_FILE (the store's credential).
  static RemoteConfig from_environment();
};

// What RemoteCache::ping() measured: one request's round trip in milliseconds, or why there is none (code
// remote: not in use, or the store's failure).
struct RemotePing {
  std::optional<double> ms;
  Reason reason;  // empty when ms has a value
};

// This process's dealings with the remote cache (one RemoteCache object).
struct RemoteStats {
  std::uint64_t hits = 0;            // entries fetched and verified
  std::uint64_t misses = 0;          // asked, not there
  std::uint64_t rejected = 0;        // there, but untagged, tagged by another key, altered, not an entry,
                                     // or a value that cannot be one (another type, over max_bytes)
  std::uint64_t errors = 0;          // calls that got no answer (down, timed out, garbage)
  std::uint64_t skipped = 0;         // calls not made because an error was recent (the circuit breaker)
  std::uint64_t stores = 0;          // entries published
  std::uint64_t refused = 0;         // writes and leases the store refused (full, read-only replica)
  std::uint64_t too_large = 0;       // entries over max_value_bytes, not published
  std::uint64_t bytes_read = 0;      // entry bytes fetched
  std::uint64_t bytes_written = 0;   // entry bytes published
  std::uint64_t leases = 0;          // fleet leases taken (this process compiled for the fleet)
  std::uint64_t lease_waits = 0;     // times another machine's lease was waited on
  std::uint64_t lease_timeouts = 0;  // waits that ran out: compiled here instead
  double lease_wait_ms = 0;          // time spent waiting on leases
};

// One remote cache. Thread-safe. Never throws from its tier work: every problem is a miss, a counted
// error or refusal, and one warning per kind.
class RemoteCache {
 public:
  // The store named by config.url (nothing is connected until first use).
  explicit RemoteCache(RemoteConfig config);
  // A store you bring, with config.settings and the fleet key (config.url is not used).
  RemoteCache(std::unique_ptr<RemoteStore> store, RemoteConfig config);
  ~RemoteCache();
  RemoteCache(const RemoteCache&) = delete;
  RemoteCache& operator=(const RemoteCache&) = delete;

  // Configured: a store, a fleet key, a valid URL. (The circuit breaker may still skip calls for a while.)
  bool usable() const noexcept;
  // Why not (empty when usable; code remote): "off (KILN_REMOTE_CACHE is not set)", a bad URL, no fleet key, ...
  const Reason& unusable_reason() const noexcept;
  // The store and mode, for messages: "redis://127.0.0.1:6379/0 (read-only)".
  std::string where() const;
  const RemoteSettings& settings() const noexcept;
  // 16 hex characters naming the fleet key (a hash of it, which reveals nothing of the key).
  std::string fleet_key_id() const;

  // The entry under `key`, verified (tag, then everything DiskCache::load checks), or nullopt.
  std::optional<CacheEntry> load(const CacheKey& key);
  // Publishes `entry` under `key` (not in read-only mode, not when larger than max_value_bytes).
  bool store(const CacheKey& key, const CacheEntry& entry);
  // One request's round trip (a GET of a key nobody writes), or why there was none. Past the breaker.
  RemotePing ping();

  RemoteStats stats() const;
  // The warnings this object has printed (each kind once), for tests and `kiln cache stats`.
  std::vector<std::string> warnings() const;

 private:
  friend detail::RemoteState& detail::remote_state(RemoteCache& remote) noexcept;
  std::unique_ptr<detail::RemoteState> state_;
};

// The process-wide remote cache configured from the environment, created on first use (off when
// KILN_REMOTE_CACHE is unset).
RemoteCache& default_remote();
RemoteStats remote_stats();

// What push() did.
struct PushReport {
  std::uint64_t pushed = 0;
  std::uint64_t bytes = 0;
  std::uint64_t skipped = 0;  // not matching the filter, or larger than max_value_bytes
  std::uint64_t replaced = 0;  // of those pushed, values in the store that did not verify, written over
};

// Uploads every entry of `cache` that matches `filter` to `remote`, tagged with its fleet key. An entry the
// store has already (a store that writes once keeps it) is left; a value under its name that does not
// verify (altered, another key's, not an entry) is replaced. Throws Error(remote) when the remote is
// unusable, read-only or fails (naming it and what to do).
PushReport push(DiskCache& cache, RemoteCache& remote, const EntryFilter& filter = {});

}  // namespace kiln
