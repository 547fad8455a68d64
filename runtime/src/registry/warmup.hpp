// The registry's warm-up state: background threads that get() what needs compiling.
#pragma once

#include "registry/registry_impl.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// The warm-up's work is units, not kernels: a unit's kernels load together, and a thread blocked on a
// unit another thread compiles would leave a worker idle (a real consumer's table: 204 units,
// 481 kernels; docs/facts.md, "Threads and parts inside a unit").

namespace kiln {

struct Registry::Impl::Warmup {
  enum class State { deferred, pending, loaded, failed };
  struct Record {
    State state = State::pending;
    bool background = false;  // queued by request_warmup (counts as submitted)
    Reason error;
  };

  explicit Warmup(Registry::Impl& registry) : registry(registry) {}
  ~Warmup();  // stops taking work and joins the threads (a compile in progress finishes first)

  // Up to `wanted` threads; with none to be had, what is queued fails with the reason. Under `mutex`.
  void start_threads(std::size_t wanted);
  void fail_queued(const Reason& why);  // under `mutex`
  void run();

  Registry::Impl& registry;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::vector<std::string>> queue;  // one entry per unit: the names asked for of its kernels
  std::map<std::string, Record, std::less<>> records;
  std::vector<std::thread> threads;
  bool stopping = false;
};

}  // namespace kiln
