// TieredStore: Redis in front of an object store, each behind its own breaker (remote/tiered_store.hpp).
#include "remote/tiered_store.hpp"

#include <kiln/error.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::detail {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One store of the pair and its breaker: after a call it failed, not asked until retry_at_ns.
struct Part {
  std::unique_ptr<RemoteStore> store;
  std::atomic<std::int64_t> retry_at_ns{0};
};

class TieredStore final : public RemoteStore {
 public:
  TieredStore(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects, std::chrono::milliseconds ttl,
              std::chrono::milliseconds retry_after, StoreFailed failed)
      : ttl_(ttl), retry_after_(retry_after), failed_(std::move(failed)) {
    redis_.store = std::move(redis);
    objects_.store = std::move(objects);
  }

  std::string where() const override { return redis_.store->where() + " + " + objects_.store->where(); }

  std::optional<std::string> get(const std::string& key) override {
    Failures failed;
    const auto cached = ask(redis_, failed, [&](RemoteStore& r) { return r.get(key); });
    if (cached && *cached) return *cached;
    const auto value = ask(objects_, failed, [&](RemoteStore& o) { return o.get(key); });
    if (!value && !cached) neither("GET of an entry", failed);
    tell("GET of an entry", failed);
    if (!value) return std::nullopt;
    // Into Redis for the next machine; a refusal (a full Redis) only loses the copy.
    if (*value && cached) {
      Failures copy;
      (void)ask(redis_, copy, [&](RemoteStore& r) { return r.put(key, **value, ttl_); });
      tell("SET of a copy", copy);
    }
    return *value;
  }

  bool contains(const std::string& key) override {
    Failures failed;
    const auto cached = ask(redis_, failed, [&](RemoteStore& r) { return r.contains(key); });
    if (cached && *cached) return true;
    const auto there = ask(objects_, failed, [&](RemoteStore& o) { return o.contains(key); });
    if (!there && !cached) neither("HEAD of an entry", failed);
    tell("HEAD of an entry", failed);
    return there && *there;
  }

  // The object store first: it is where entries last. Redis refusing is no refusal of the publish; an
  // object store that fails leaves the entry to Redis alone.
  RemoteReply put(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    return publish(key, value, ttl, false);
  }
  RemoteReply put_over(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    return publish(key, value, ttl, true);
  }

  // On Redis; while it is out, as objects in the object store (remote/object_lease.hpp).
  RemoteReply try_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return either("a lease", [&](RemoteStore& s) { return s.try_lease(key, token, ttl); });
  }
  bool lease_held(const std::string& key, std::chrono::milliseconds ttl) override {
    return either("a lease's check", [&](RemoteStore& s) { return s.lease_held(key, ttl); });
  }
  bool renew_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return either("a lease's renewal", [&](RemoteStore& s) { return s.renew_lease(key, token, ttl); });
  }
  void release_lease(const std::string& key, const std::string& token) override {
    (void)either("a lease's release", [&](RemoteStore& s) {
      s.release_lease(key, token);
      return true;
    });
  }

 private:
  // The stores that failed one call, with why; told to failed_ only when the other answered it.
  using Failures = std::vector<std::pair<const Part*, std::string>>;

  // `call(store)`, or nullopt when the store's breaker is open or it fails now (added to `failed`, and its
  // breaker opened). A bad value at one name is no failure of the store: it goes to the caller.
  template <typename Call>
  std::optional<std::invoke_result_t<Call&, RemoteStore&>> ask(Part& part, Failures& failed, Call&& f) {
    if (now_ns() < part.retry_at_ns.load(std::memory_order_relaxed)) return std::nullopt;
    try {
      return f(*part.store);
    } catch (const RemoteBadValue&) {
      throw;
    } catch (const std::exception& e) {
      part.retry_at_ns.store(now_ns() + std::chrono::nanoseconds(retry_after_).count(), std::memory_order_relaxed);
      failed.emplace_back(&part, e.what());
      return std::nullopt;
    }
  }

  void tell(std::string_view call, const Failures& failed) const {
    if (failed_)
      for (const auto& [part, why] : failed) failed_(part->store->where(), call, why);
  }

  // Redis's answer, else the object store's, else the tier's failure.
  template <typename Call>
  std::invoke_result_t<Call&, RemoteStore&> either(std::string_view call, Call&& f) {
    Failures failed;
    auto r = ask(redis_, failed, f);
    if (!r) r = ask(objects_, failed, f);
    if (!r) neither(call, failed);
    tell(call, failed);
    return *r;
  }

  RemoteReply publish(const std::string& key, std::string_view value, std::chrono::milliseconds ttl, bool over) {
    const auto write = [&](RemoteStore& s) { return over ? s.put_over(key, value, ttl) : s.put(key, value, ttl); };
    Failures failed;
    const auto kept = ask(objects_, failed, write);
    if (kept && kept->kind != RemoteReply::done) return *kept;
    const auto copy = ask(redis_, failed, write);
    if (!kept && !copy) neither("PUT of an entry", failed);
    tell("PUT of an entry", failed);
    return kept ? *kept : *copy;
  }

  // Neither store answered: the whole tier's failure, with each one's reason (or that it is left alone).
  [[noreturn]] void neither(std::string_view call, const Failures& failed) const {
    std::string why;
    for (const Part* part : {&redis_, &objects_}) {
      std::string reason = "left alone after a failure";
      for (const auto& [p, text] : failed)
        if (p == part) reason = text;
      why += (why.empty() ? "" : "; ") + part->store->where() + ": " + reason;
    }
    throw Error(Errc::remote, "neither of its stores answered " + std::string(call) + " (" + why + ")");
  }

  Part redis_, objects_;
  const std::chrono::milliseconds ttl_, retry_after_;
  const StoreFailed failed_;
};

}  // namespace

std::unique_ptr<RemoteStore> make_tiered_store(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects,
                                               std::chrono::milliseconds ttl, std::chrono::milliseconds retry_after,
                                               StoreFailed failed) {
  return std::make_unique<TieredStore>(std::move(redis), std::move(objects), ttl, retry_after, std::move(failed));
}

}  // namespace kiln::detail
