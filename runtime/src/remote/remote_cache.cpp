// RemoteCache: configuration, the circuit breaker, fetching and publishing verified entries, push.
#include "remote/remote_state.hpp"

#include "chain/entry.hpp"
#include "chain/key.hpp"
#include "remote/config.hpp"
#include "remote/store_url.hpp"

#include <kiln/error.hpp>

#include <chrono>

namespace kiln {

namespace detail {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string seconds_text(std::chrono::milliseconds ms) {
  const auto s = ms.count() / 1000;
  return s > 0 ? std::to_string(s) + " s" : std::to_string(ms.count()) + " ms";
}

// What every warning ends with: kiln goes on without the remote tier's help.
constexpr std::string_view kStillWorks = "kernels still come from the disk cache and the JIT";

// Takes the store and the fleet key, or records why the remote tier cannot be used.
void set_up(RemoteState& s, std::unique_ptr<RemoteStore> store, const RemoteConfig& config) {
  if (s.settings.read_only) s.where += " (read-only)";
  Result<FleetKeyText> key = load_fleet_key(config);
  if (!key) {
    s.unusable = {Errc::remote, key.error()};
    s.warn("unusable", "not using the remote cache " + s.where + ": " + key.error() + " (" + std::string(kStillWorks) + ")");
    return;
  }
  if (!key->warning.empty()) s.warn("key_readable", key->warning);
  s.key.emplace(std::move(key->key));
  s.store = std::move(store);
}

}  // namespace

std::string entry_key(const RemoteState& s, const CacheKey& key) { return "kiln:" + s.key->id_hex() + ":entry:" + key.hex; }
std::string lease_key(const RemoteState& s, const CacheKey& key) { return "kiln:" + s.key->id_hex() + ":lease:" + key.hex; }

std::string refusal_hint(std::string_view refusal) {
  if (refusal.starts_with("HTTP 401") || refusal.starts_with("HTTP 403"))
    return "a credential that may not write (a read-only token): give publishing machines one that may, or add mode=ro";
  if (refusal.starts_with("HTTP 405"))
    return "a server that takes no PUT: nginx needs `dav_methods PUT DELETE;` in the location";
  if (refusal.starts_with("HTTP 409")) return "a server that makes no directories: nginx needs `create_full_put_path on;`";
  if (refusal.starts_with("HTTP 413")) return "a server's body limit below max_bytes: raise nginx's client_max_body_size";
  if (refusal.starts_with("HTTP 507")) return "a full server: free space on it";
  if (refusal.starts_with("READONLY"))
    return "a read-only replica: point KILN_REMOTE_CACHE at the primary, or add mode=ro";
  if (refusal.starts_with("OOM")) return "a full Redis: raise maxmemory, or set maxmemory-policy allkeys-lru";
  return "see the server's words; a full Redis needs a larger maxmemory or maxmemory-policy allkeys-lru";
}

void remember_rejected(RemoteState& s, const CacheKey& key) {
  constexpr std::size_t kMaxRemembered = 4096;
  const std::lock_guard lock(s.rejected_mutex);
  if (s.rejected_keys.size() < kMaxRemembered) s.rejected_keys.insert(key.hex);
}

namespace {

// Whether `key`'s value in the store was rejected here (forgotten once asked: one put_over replaces it).
bool take_rejected(RemoteState& s, const CacheKey& key) {
  const std::lock_guard lock(s.rejected_mutex);
  return s.rejected_keys.erase(key.hex) > 0;
}

}  // namespace

bool skip_call(RemoteState& s) {
  if (now_ns() >= s.retry_at_ns.load(std::memory_order_relaxed)) return false;
  ++s.skipped;
  return true;
}

void record_failure(RemoteState& s, std::string_view call, const std::string& why) {
  ++s.errors;
  s.retry_at_ns.store(now_ns() + std::chrono::nanoseconds(s.settings.retry_after).count(), std::memory_order_relaxed);
  s.warn("failed", "the remote cache " + s.where + " failed (" + std::string(call) + ": " + why + "); " + std::string(kStillWorks) +
                       "; it is not asked again for " + seconds_text(s.settings.retry_after) +
                       ", and later failures are only counted (kiln cache stats)");
}

void record_store_failure(RemoteState& s, const std::string& store, std::string_view call, const std::string& why) {
  ++s.errors;
  s.warn("failed " + store, "the remote cache's store " + store + " failed (" + std::string(call) + ": " + why +
                                "); the other store of " + s.where + " is still used; " + store + " is not asked again for " +
                                seconds_text(s.settings.retry_after) + ", and later failures are only counted (kiln cache stats)");
}

Result<RemoteEntry> fetch_entry(RemoteState& s, const CacheKey& key, Count count) {
  std::string problem;  // why the value there is not a usable entry
  auto got = guarded(s, "GET of an entry", [&]() -> std::optional<std::string> {
    try {
      return s.store->get(entry_key(s, key));
    } catch (const RemoteBadValue& e) {  // a bad value at this one name: a miss for it, not a failure
      problem = e.what();
      return std::nullopt;
    }
  });
  if (!got) return fail(got.error());
  RemoteEntry r;
  if (problem.empty()) {
    if (!*got) {
      if (count == Count::lookup) ++s.misses;
      return fail("the remote cache " + s.where + " has no entry for it (key " + key.hex + ")");
    }
    r.value = std::move(**got);
    s.bytes_read += r.value.size();
    if (const auto file = open_entry(*s.key, r.value); !file) {
      problem = file.error();
    } else if (auto decoded = decode_entry(*file, key); !decoded) {
      problem = "it is not a valid entry (" + decoded.error() + ")";
    } else {
      r.entry = std::move(decoded).value();
      ++s.hits;
      return r;
    }
  }
  ++s.rejected;
  remember_rejected(s, key);
  s.warn("rejected", "ignoring the remote cache's entry for " + describe_key(key) + " in " + s.where + ": " + problem +
                         "; it is a miss, rebuilt and published again (later ones are only counted: kiln cache stats)");
  return fail("the remote cache " + s.where + " has no usable entry for it (key " + key.hex + ": " + problem + ")");
}

bool publish_file(RemoteState& s, const CacheKey& key, std::string_view entry_file) {
  if (!s.usable() || s.settings.read_only) return false;
  const std::string value = seal_entry(*s.key, entry_file);
  if (value.size() > s.settings.max_value_bytes) {
    ++s.too_large;
    s.warn("too_large", "not publishing " + describe_key(key) + " to the remote cache " + s.where + ": " +
                            std::to_string(value.size()) + " bytes, more than its cap of " +
                            std::to_string(s.settings.max_value_bytes) + " (max_bytes in KILN_REMOTE_CACHE)");
    return false;
  }
  const bool over = take_rejected(s, key);
  const auto reply = guarded(s, "SET of an entry", [&] {
    const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(s.settings.ttl);
    return over ? s.store->put_over(entry_key(s, key), value, ttl) : s.store->put(entry_key(s, key), value, ttl);
  });
  if (!reply) return false;
  if (reply->kind != RemoteReply::done) {
    ++s.refused;
    s.warn("refused", "the remote cache " + s.where + " refuses to store entries (" + reply->refusal +
                          "); nothing is shared until it takes them again (" + refusal_hint(reply->refusal) + "); " +
                          std::string(kStillWorks));
    return false;
  }
  ++s.stores;
  s.bytes_written += value.size();
  return true;
}

bool publish_entry(RemoteState& s, const CacheKey& key, const CacheEntry& entry) {
  if (!s.usable() || s.settings.read_only || !check_entry(entry, key.arch)) return false;
  std::string file;
  try {
    file = encode_entry(key, entry);
  } catch (const std::exception&) {
    return false;  // the disk cache's store() refused it too, and warned
  }
  return publish_file(s, key, file);
}

RemoteState& remote_state(RemoteCache& remote) noexcept { return *remote.state_; }

}  // namespace detail

RemoteCache::RemoteCache(RemoteConfig config) : state_(std::make_unique<detail::RemoteState>()) {
  detail::RemoteState& s = *state_;
  s.settings = config.settings;
  if (detail::remote_off(config.url)) {
    s.unusable = {Errc::remote, "off (KILN_REMOTE_CACHE is not set)"};
    s.where = "off";
    return;
  }
  // s outlives the store, which it owns.
  auto chosen = detail::store_from_url(config, s.settings, [&s](const std::string& store, std::string_view call,
                                                                const std::string& why) {
    detail::record_store_failure(s, store, call, why);
  });
  if (!chosen) {
    s.unusable = {Errc::remote, chosen.error()};
    s.where = "(unusable URL)";
    s.warn("unusable", "not using the remote cache: " + chosen.error() + " (" + std::string(detail::kStillWorks) + ")");
    return;
  }
  s.where = chosen->where;
  s.expiry = chosen->expiry;
  if (!chosen->warning.empty()) s.warn("auth_readable", chosen->warning);
  if (!chosen->cleartext.empty()) s.warn("cleartext", chosen->cleartext);
  detail::set_up(s, std::move(chosen->store), config);
}

RemoteCache::RemoteCache(std::unique_ptr<RemoteStore> store, RemoteConfig config)
    : state_(std::make_unique<detail::RemoteState>()) {
  detail::RemoteState& s = *state_;
  s.settings = config.settings;
  if (!store) {
    s.unusable = {Errc::remote, "no store was given"};
    s.where = "(none)";
    return;
  }
  s.where = store->where();
  detail::set_up(s, std::move(store), config);
}

RemoteCache::~RemoteCache() = default;

bool RemoteCache::usable() const noexcept { return state_->usable(); }
const Reason& RemoteCache::unusable_reason() const noexcept { return state_->unusable; }
std::string RemoteCache::where() const { return state_->where; }
const RemoteSettings& RemoteCache::settings() const noexcept { return state_->settings; }
std::string RemoteCache::fleet_key_id() const { return state_->key ? state_->key->id_hex() : std::string(); }
std::vector<std::string> RemoteCache::warnings() const { return state_->warnings.printed(); }

std::optional<CacheEntry> RemoteCache::load(const CacheKey& key) {
  if (!usable()) return std::nullopt;
  auto got = detail::fetch_entry(*state_, key);
  if (!got) return std::nullopt;
  return std::move(got->entry);
}

bool RemoteCache::store(const CacheKey& key, const CacheEntry& entry) { return detail::publish_entry(*state_, key, entry); }

RemotePing RemoteCache::ping() {
  RemotePing ping;
  if (!usable()) {
    ping.reason = state_->unusable;
    return ping;
  }
  // Asked directly, past the breaker: someone wants to know now.
  const auto start = std::chrono::steady_clock::now();
  if (const detail::Status answered = detail::store_call([this] { (void)state_->store->get("kiln:ping"); }); !answered) {
    ping.reason = {Errc::remote, answered.error()};
    return ping;
  }
  ping.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return ping;
}

RemoteStats RemoteCache::stats() const {
  const detail::RemoteState& s = *state_;
  RemoteStats r;
  r.hits = s.hits;
  r.misses = s.misses;
  r.rejected = s.rejected;
  r.errors = s.errors;
  r.skipped = s.skipped;
  r.stores = s.stores;
  r.refused = s.refused;
  r.too_large = s.too_large;
  r.bytes_read = s.bytes_read;
  r.bytes_written = s.bytes_written;
  r.leases = s.leases;
  r.lease_waits = s.lease_waits;
  r.lease_timeouts = s.lease_timeouts;
  r.lease_wait_ms = static_cast<double>(s.lease_wait_us) / 1000.0;
  return r;
}

RemoteCache& default_remote() {
  // Leaked on purpose, as the JIT pool is: registries destroyed during static destruction may still
  // compile, and publish, on their way out.
  static RemoteCache& remote = *new RemoteCache(RemoteConfig::from_environment());
  return remote;
}

RemoteStats remote_stats() { return default_remote().stats(); }

namespace {

// Whether `value` is a sealed entry under this fleet's key that serves `key` (what fetch_entry accepts).
bool verifies(const detail::RemoteState& s, const CacheKey& key, std::string_view value) {
  const auto file = detail::open_entry(*s.key, value);
  return file && detail::decode_entry(*file, key);
}

}  // namespace

PushReport push(DiskCache& cache, RemoteCache& remote, const EntryFilter& filter) {
  detail::RemoteState& s = detail::remote_state(remote);
  if (!s.usable()) throw Error(Errc::remote, "kiln: cache push: the remote cache is not in use: " + s.unusable.message);
  if (s.settings.read_only)
    throw Error(Errc::remote, "kiln: cache push: the remote cache " + s.where +
                                  " is read-only (mode=ro in KILN_REMOTE_CACHE): nothing can be pushed to it");
  if (!cache.usable()) throw Error(Errc::cache, "kiln: cache push: the disk cache is not in use: " + cache.unusable_reason().message);
  PushReport report;
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(s.settings.ttl);
  cache.for_each_entry([&](const CacheKey& key, std::string_view file) {
    const std::string value = filter.matches(key) ? detail::seal_entry(*s.key, file) : std::string();
    if (value.empty() || value.size() > s.settings.max_value_bytes) {
      ++report.skipped;
      return;
    }
    // Straight to the store, past the breaker: a failure here is the answer the caller wants. A store that
    // writes once (HTTP, S3) would keep a value there that does not verify (altered, planted, cut short),
    // and push is how an operator repairs one: such a value is written over.
    RemoteReply reply;
    const std::string name = detail::entry_key(s, key);
    if (const detail::Status put = detail::store_call([&] {
          bool bad = false;
          try {
            const auto there = s.store->get(name);
            bad = there && !verifies(s, key, *there);
          } catch (const RemoteBadValue&) {
            bad = true;
          }
          reply = bad ? s.store->put_over(name, value, ttl) : s.store->put(name, value, ttl);
          report.replaced += bad && reply.kind == RemoteReply::done;
        });
        !put) {
      ++s.errors;
      throw Error(Errc::remote, "kiln: cache push to " + s.where + " failed after " + std::to_string(report.pushed) +
                                    " entries: " + put.error() + " (is the server up, and KILN_REMOTE_CACHE right?)");
    }
    if (reply.kind != RemoteReply::done) {
      ++s.refused;
      throw Error(Errc::remote, "kiln: cache push to " + s.where + " stopped after " + std::to_string(report.pushed) +
                                    " entries: the server refuses to store (" + reply.refusal + "): " +
                                    detail::refusal_hint(reply.refusal));
    }
    ++s.stores;
    s.bytes_written += value.size();
    ++report.pushed;
    report.bytes += value.size();
  });
  return report;
}

}  // namespace kiln
