// The fleet's single-flight: one machine builds a key under a lease in the store, the others wait for its
// entry; a dead holder's lease expires, a waiter that waited long enough builds the key itself.
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
// can then be short, so that one whose holder died frees its key soon.
class LeaseKeeper {
 public:
  LeaseKeeper(RemoteState& s, const std::string& key, const std::string& token)
      : s_(s), key_(key), token_(token), thread_([this] { renew_until_stopped(); }) {}
  ~LeaseKeeper() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
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
  std::thread thread_;  // last: started once everything it uses exists
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

CacheEntry build_and_publish(RemoteState& s, const CacheKey& key, const std::function<CacheEntry()>& build) {
  CacheEntry entry = build();
  publish_entry(s, key, entry);
  return entry;
}

// Holding the lease: the entry, if the holder before this one published it after this process looked;
// else built here (the lease renewed meanwhile), published, and the lease released.
FleetBuild build_under_lease(RemoteState& s, const CacheKey& key, const std::string& lease, const std::string& token,
                             const std::function<CacheEntry()>& build) {
  ++s.leases;
  if (auto got = fetch_entry(s, key, Count::poll)) {
    release(s, lease, token);
    return {std::move(got->entry), true};
  }
  std::optional<CacheEntry> entry;
  std::exception_ptr failed;
  {
    const LeaseKeeper keeper(s, lease, token);
    try {
      entry = build();
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (failed) {
    release(s, lease, token);  // waiters take it over at once, rather than when it expires
    std::rethrow_exception(failed);
  }
  publish_entry(s, key, *entry);
  release(s, lease, token);
  return {std::move(*entry), false};
}

}  // namespace

FleetBuild build_once_in_fleet(RemoteCache* remote, const CacheKey& key, const std::function<CacheEntry()>& build) {
  if (remote == nullptr || !remote->usable()) return {build(), false};
  RemoteState& s = remote_state(*remote);
  // No look before the lease: the chain has just asked (kiln::precompile has not, and finds a published
  // entry once it holds the lease).
  const std::string lease = lease_key(key);
  const std::string token = lease_token();
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
        return build_under_lease(s, key, lease, token, build);
      }
      if (!taken || taken->kind == RemoteReply::refused) {
        // The store cannot arbitrate (it failed, or it is full): build here, as without a remote.
        if (taken) {
          ++s.refused;
          s.warn("lease_refused", "the remote cache " + s.where + " refuses leases (" + taken->refusal +
                                      "): machines missing the same kernel compile it each on their own until it takes "
                                      "them again (a full Redis: raise maxmemory, or set maxmemory-policy allkeys-lru)");
        }
        stop_waiting();
        return {build_and_publish(s, key, build), false};
      }
    } else {
      // Read-only: no lease of its own, but one another machine holds is worth waiting for.
      const auto held = guarded(s, "EXISTS of a lease", [&] { return s.store->contains(lease); });
      if (!held || !*held) {
        stop_waiting();
        if (auto got = fetch_entry(s, key, Count::poll)) return {std::move(got->entry), true};
        return {build(), false};
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
      return {s.settings.read_only ? build() : build_and_publish(s, key, build), false};
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff.next(), deadline - now));
    if (auto got = fetch_entry(s, key, Count::poll)) {
      stop_waiting();
      return {std::move(got->entry), true};
    }
  }
}

}  // namespace kiln::detail
