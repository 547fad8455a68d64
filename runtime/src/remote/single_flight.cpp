// The fleet's single flight, as a store a build goes through (chain/store.hpp): one machine builds a key
// under a lease in the store, the others wait for its entry; a dead holder's lease expires, a waiter that
// waited long enough builds the key itself.
#include "base/thread_start.hpp"
#include "chain/key.hpp"  // describe_key
#include "remote/remote_state.hpp"
#include "remote/remote_tier.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

namespace kiln::detail {

namespace {

using Clock = std::chrono::steady_clock;

// "host:pid:random": unique, and says whose lease it is to whoever looks into the store.
std::string lease_token() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::random_device random;
  const std::uint64_t r = (std::uint64_t{random()} << 32) ^ random();
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(r));
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + suffix;
}

// Renews a held lease every third of its life, from a thread of its own, while the build runs: a lease
// can then be short, so that one whose holder died frees its key soon. With no thread to be had, the lease
// is not renewed: it expires, and a waiter builds too (the build here goes on regardless).
class LeaseKeeper {
 public:
  LeaseKeeper(RemoteState& s, const std::string& key, const std::string& token) : s_(s), key_(key), token_(token) {
    if (Result<std::thread> thread = start_thread([this] { renew_until_stopped(); })) thread_ = std::move(thread).value();
  }
  ~LeaseKeeper() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  void renew_until_stopped() {
    std::unique_lock lock(mutex_);
    const auto period = std::max(s_.settings.lease_ttl / 3, std::chrono::milliseconds(10));
    while (!wake_.wait_for(lock, period, [this] { return stop_; })) {
      lock.unlock();
      const auto renewed = guarded(s_, "renewing a lease", [this] {
        return s_.store->renew_lease(key_, token_, s_.settings.lease_ttl);
      });
      lock.lock();
      if (!renewed || !*renewed) return;  // lost, or the store failed: the build goes on regardless
    }
  }

  RemoteState& s_;
  const std::string& key_;
  const std::string& token_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // started once everything it uses exists
};

void release(RemoteState& s, const std::string& key, const std::string& token) {
  (void)guarded(s, "releasing a lease", [&] {
    s.store->release_lease(key, token);
    return true;
  });
}

// Between polls of a waiter: 5 ms, growing by half up to 100 ms, each with up to a quarter of jitter so that
// waiters do not poll in step.
class Backoff {
 public:
  Clock::duration next() {
    const auto jitter = std::uniform_real_distribution<double>(0.75, 1.0)(random_);
    const auto wait = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms_ * jitter));
    ms_ = std::min(ms_ * 1.5, 100.0);
    return wait;
  }

 private:
  double ms_ = 5;
  std::minstd_rand random_{std::random_device{}()};
};

// Holding the key's lease: renewed while the build runs; the entry published, then the lease released
// (released at once, without an entry, when the build fails: waiters take it over rather than wait for
// it to expire).
class LeaseHold final : public StoreHold {
 public:
  LeaseHold(RemoteState& s, CacheKey key, std::string lease, std::string token)
      : s_(s), key_(std::move(key)), lease_(std::move(lease)), token_(std::move(token)),
        keeper_(std::make_unique<LeaseKeeper>(s_, lease_, token_)) {}
  ~LeaseHold() override {
    keeper_.reset();
    if (!released_) release(s_, lease_, token_);
  }
  Status publish(const CacheEntry& entry) override {
    keeper_.reset();
    const bool published = publish_entry(s_, key_, entry);
    release(s_, lease_, token_);
    released_ = true;
    return published ? ok() : fail("the remote cache " + s_.where + " did not take it");
  }

 private:
  RemoteState& s_;
  const CacheKey key_;
  const std::string lease_, token_;
  std::unique_ptr<LeaseKeeper> keeper_;
  bool released_ = false;
};

// No lease to hold (the store refuses leases, or the wait for another machine's ran out): what is built
// here is still published.
class PublishHold final : public StoreHold {
 public:
  PublishHold(RemoteState& s, CacheKey key) : s_(s), key_(std::move(key)) {}
  Status publish(const CacheEntry& entry) override {
    return publish_entry(s_, key_, entry) ? ok() : fail("the remote cache " + s_.where + " did not take it");
  }

 private:
  RemoteState& s_;
  const CacheKey key_;
};

// The fleet's entry under `key` when there is one that passes `check` (one that fails it is counted as
// rejected: another machine's foreign entry is rebuilt here, as a corrupt one is).
std::optional<CacheEntry> fetch_checked(RemoteState& s, const CacheKey& key, const EntryCheck& check) {
  auto got = fetch_entry(s, key, Count::poll);
  if (!got) return std::nullopt;
  if (check) {
    if (const Status fits = check(got->entry); !fits) {
      ++s.rejected;
      remember_rejected(s, key);
      s.warn("foreign", "the remote cache " + s.where + " holds an entry under " + describe_key(key) +
                            " that cannot serve it (" + fits.error() + "); building it here");
      return std::nullopt;
    }
  }
  return std::move(got->entry);
}

Claim found(CacheEntry entry) {
  Claim claim;
  claim.found = std::move(entry);
  return claim;
}

Claim held(std::unique_ptr<StoreHold> hold) {
  Claim claim;
  claim.hold = std::move(hold);
  return claim;
}

// The remote cache as a store a build goes through: the key's lease, or the entry another machine built.
class FleetStore final : public UnitStore {
 public:
  explicit FleetStore(RemoteCache& remote) : remote_(remote) {}
  Tier tier() const noexcept override { return Tier::remote; }

  // The entry if another machine published it; else this process takes the key's lease; or, when another
  // machine holds it, waits for its entry, polling, at most lease_wait, after which it builds itself. A
  // read-only remote never takes a lease or publishes, but waits on one another holds.
  Claim claim(const CacheKey& key, const EntryCheck& check) override {
    if (!remote_.usable()) return {};
    RemoteState& s = remote_state(remote_);
    // No look before the lease: the chain has just asked (kiln::precompile has not, and finds a published
    // entry once it holds the lease).
    std::string lease = lease_key(s, key);
    std::string token = lease_token();
    std::optional<Clock::time_point> waiting_since;
    Clock::time_point deadline;
    const auto stop_waiting = [&] {
      if (waiting_since)
        s.lease_wait_us += static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - *waiting_since).count());
    };
    Backoff backoff;
    for (;;) {
      if (!s.settings.read_only) {
        const auto taken = guarded(s, "SET NX of a lease", [&] { return s.store->try_lease(lease, token, s.settings.lease_ttl); });
        if (taken && taken->kind == RemoteReply::done) {
          stop_waiting();
          ++s.leases;
          // The holder before this one may have published after this process looked.
          if (auto got = fetch_checked(s, key, check)) {
            release(s, lease, token);
            return found(std::move(*got));
          }
          return held(std::make_unique<LeaseHold>(s, key, std::move(lease), std::move(token)));
        }
        if (!taken || taken->kind == RemoteReply::refused) {
          // The store cannot arbitrate (it failed, or it is full): build here, as without a remote.
          if (taken) {
            ++s.refused;
            // The kind of a refused publish: a store that refuses writes says so once, whichever came first.
            s.warn("refused", "the remote cache " + s.where + " refuses to store entries and leases (" + taken->refusal +
                                  "): nothing is shared, and machines missing the same kernel compile it each on "
                                  "their own, until it takes them again (" + refusal_hint(taken->refusal) + ")");
          }
          stop_waiting();
          return held(std::make_unique<PublishHold>(s, key));
        }
      } else {
        // Read-only: no lease of its own, but one another machine holds is worth waiting for.
        const auto holder = guarded(s, "PTTL of a lease", [&] { return s.store->lease_held(lease, s.settings.lease_ttl); });
        if (!holder || !*holder) {
          stop_waiting();
          if (auto got = fetch_checked(s, key, check)) return found(std::move(*got));
          return {};
        }
      }
      const auto now = Clock::now();
      if (!waiting_since) {
        waiting_since = now;
        deadline = now + s.settings.lease_wait;
        ++s.lease_waits;
      }
      if (now >= deadline) {
        ++s.lease_timeouts;
        stop_waiting();
        s.warn("lease_wait", "waited " + std::to_string(s.settings.lease_wait.count()) + " ms for another machine to build " +
                                 "a kernel (its lease " + lease + " in " + s.where +
                                 "); building it here (wait_ms in KILN_REMOTE_CACHE sets the wait)");
        if (s.settings.read_only) return {};
        return held(std::make_unique<PublishHold>(s, key));
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff.next(), deadline - now));
      if (auto got = fetch_checked(s, key, check)) {
        stop_waiting();
        return found(std::move(*got));
      }
    }
  }

 private:
  RemoteCache& remote_;
};

}  // namespace

std::unique_ptr<UnitStore> fleet_store(RemoteCache& remote) { return std::make_unique<FleetStore>(remote); }

FleetBuild build_once_in_fleet(RemoteCache* remote, const CacheKey& key, const std::function<CacheEntry()>& build) {
  if (remote == nullptr) return {build(), false};
  Claim claim = fleet_store(*remote)->claim(key, {});
  if (claim.found) return {std::move(*claim.found), true};
  CacheEntry entry = build();  // a throw releases the hold without publishing
  if (claim.hold) (void)claim.hold->publish(entry);
  return {std::move(entry), false};
}

}  // namespace kiln::detail
