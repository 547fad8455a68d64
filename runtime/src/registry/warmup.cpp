// Demand-driven warm-up: request_warmup, ensure_warm, precompile_all, status.
#include "registry/warmup.hpp"

#include "base/parse.hpp"        // parse_switch
#include "base/settings.hpp"     // KILN_PRECOMPILE
#include "base/thread_start.hpp"
#include "jit/jit_pool.hpp"  // kMaxJitRequestsInFlight
#include "jit/request.hpp"   // longest_first

#include <kiln/error.hpp>
#include <kiln/select.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <cstring>
#include <vector>

namespace kiln {
namespace {

bool background_allowed() {
  const std::string value = detail::setting("KILN_PRECOMPILE");
  if (value.empty()) return true;
  const auto on = detail::parse_switch(value);
  if (!on) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "kiln: warning: KILN_PRECOMPILE=%s; background precompiling stays on\n", on.error().c_str());
    });
  }
  return !on || *on;
}

}  // namespace

Registry::Impl::Warmup::~Warmup() {
  {
    std::lock_guard lock(mutex);
    stopping = true;
    queue.clear();
  }
  changed.notify_all();
  for (auto& t : threads) t.join();
}

void Registry::Impl::Warmup::start_threads(std::size_t wanted) {
  // Each blocks in get() while a worker compiles; more threads than workers, so that the pool sees the
  // backlog it schedules (which units wait for a PCH, which builds one).
  const std::size_t limit = detail::kMaxJitRequestsInFlight;
  while (threads.size() < std::min(wanted, limit)) {
    detail::Result<std::thread> thread = detail::start_thread([this] { run(); });
    if (!thread) {
      if (threads.empty()) fail_queued({Errc::compile, "kiln: warm-up: " + thread.error()});  // else the threads there are take it
      return;
    }
    threads.push_back(std::move(thread).value());
  }
}

void Registry::Impl::Warmup::fail_queued(const Reason& why) {
  for (const std::vector<std::string>& names : queue) {
    for (const std::string& name : names) {
      Record& r = records[name];
      r.state = State::failed;
      r.error = why;
    }
  }
  queue.clear();
  changed.notify_all();
}

void Registry::Impl::Warmup::run() {
  std::unique_lock lock(mutex);
  for (;;) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (stopping) return;
    const std::vector<std::string> names = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    // The first get() loads (or compiles) the unit; the others find it loaded.
    std::vector<Reason> errors;
    for (const std::string& name : names) {
      Reason error;
      try {
        registry.ready(name);
      } catch (const Error& e) {
        error = {e.code(), e.what()};
      } catch (const std::exception& e) {
        error = {Errc::compile, e.what()};
      }
      errors.push_back(std::move(error));
    }
    lock.lock();
    for (std::size_t i = 0; i < names.size(); ++i) {
      Record& r = records[names[i]];
      r.state = errors[i].empty() ? State::loaded : State::failed;
      r.error = std::move(errors[i]);
    }
    changed.notify_all();
  }
}

void Registry::Impl::request_warmup(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const KernelEntry* entry = find(name);
    if (!entry) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog_, name));
    if (catalog_.units[entry->unit].linked) throw Error(Errc::no_binary, linked_unit_message(catalog_, *entry));
  }
  // No driver or no GPU: nothing to warm, and CUDA is not initialised for it.
  if (!background_allowed() || !driver_available()) return;
  ensure_device();
  std::lock_guard guard(warmup_mutex_);
  if (!warmup_) warmup_ = std::make_unique<Warmup>(*this);
  Warmup& w = *warmup_;
  std::vector<std::string> fresh;
  for (const auto& name : names) {
    {
      std::lock_guard lock(w.mutex);
      if (w.records.count(name)) continue;  // asked before: deduplicated
    }
    const std::size_t index = static_cast<std::size_t>(find(name) - catalog_.kernels.data());
    Warmup::Record record;
    if (slots_[index].loaded.load(std::memory_order_acquire)) {
      record.state = Warmup::State::loaded;
    } else {
      const LoadPlan p = plan(name);  // a directory probe, or one bounded remote EXISTS, at most
      if (p.available && p.tier != Tier::jit) {
        record.state = Warmup::State::deferred;
      } else {
        record.background = true;
        fresh.push_back(name);
      }
    }
    std::lock_guard lock(w.mutex);
    w.records.emplace(name, std::move(record));
  }
  if (fresh.empty()) return;  // nothing to compile: no pool started
  std::map<std::uint32_t, std::vector<std::string>> by_unit;
  for (auto& name : fresh) by_unit[find(name)->unit].push_back(std::move(name));
  std::vector<std::uint32_t> units;
  for (const auto& entry : by_unit) units.push_back(entry.first);
  std::lock_guard lock(w.mutex);
  // The longest compiles first, as kiln::precompile hands them in.
  for (const std::uint32_t unit : detail::longest_first(catalog_, std::move(units))) w.queue.push_back(std::move(by_unit[unit]));
  w.start_threads(w.queue.size());
  w.changed.notify_all();
}

std::vector<std::string> Registry::Impl::ensure_warm(const std::vector<std::string>& names,
                                               std::chrono::milliseconds timeout) {
  request_warmup(names);
  std::vector<std::string> cold;
  Warmup* warmup = nullptr;
  {
    // Only to read the pointer: once made, the Warmup lives as long as the registry, and waiting here
    // must not block status() or other request_warmup() calls.
    std::lock_guard guard(warmup_mutex_);
    warmup = warmup_.get();
  }
  if (!warmup) return names;  // background work is off, or there is no GPU
  Warmup& w = *warmup;
  std::unique_lock lock(w.mutex);
  const auto ready = [&](const std::string& name) {
    const auto it = w.records.find(name);
    return it != w.records.end() && (it->second.state == Warmup::State::loaded || it->second.state == Warmup::State::deferred);
  };
  const auto settled = [&] {
    return std::all_of(names.begin(), names.end(), [&](const std::string& name) {
      const auto it = w.records.find(name);
      return it == w.records.end() || it->second.state != Warmup::State::pending;
    });
  };
  w.changed.wait_for(lock, timeout, settled);
  for (const auto& name : names)
    if (!ready(name)) cold.push_back(name);
  return cold;
}

void Registry::Impl::precompile_all() {
  std::vector<std::string> names;
  for (const auto& k : catalog_.kernels) {
    if (!catalog_.units[k.unit].linked) names.emplace_back(catalog_.str(k.name));  // built only with their operator
  }
  request_warmup(names);
}

WarmupStatus Registry::Impl::status() {
  WarmupStatus s;
  std::lock_guard guard(warmup_mutex_);
  for (std::size_t i = 0; i < catalog_.kernels.size(); ++i) {
    const std::string name(catalog_.str(catalog_.kernels[i].name));
    const Loaded* slot = slots_[i].loaded.load(std::memory_order_acquire);
    const Kernel* loaded = slot ? &slot->kernel : nullptr;
    const Warmup::Record* record = nullptr;
    std::unique_lock<std::mutex> lock;
    if (warmup_) {
      lock = std::unique_lock(warmup_->mutex);
      const auto it = warmup_->records.find(name);
      if (it != warmup_->records.end()) record = &it->second;
    }
    if (!loaded && !record) continue;
    WarmupStatus::PerKernel k;
    k.name = name;
    if (record && record->background) ++s.submitted;
    if (loaded) {
      k.state = "loaded";
      k.tier = loaded->provenance.source;
      k.ms = loaded->provenance.load_ms;
      if (record && record->background) ++s.compiled;
      if (record && record->state == Warmup::State::deferred) ++s.deferred;
    } else if (record->state == Warmup::State::deferred) {
      k.state = "deferred";
      ++s.deferred;
    } else if (record->state == Warmup::State::failed) {
      k.state = "failed";
      k.error = record->error;
      ++s.failed;
    } else {
      k.state = "pending";
      ++s.pending;
    }
    s.kernels.push_back(std::move(k));
  }
  return s;
}

}  // namespace kiln
