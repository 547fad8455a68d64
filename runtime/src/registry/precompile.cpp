// kiln::precompile: the tier chain for an architecture, into the disk cache.
#include <kiln/cache.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/remote.hpp>
#include <kiln/select.hpp>

#include "base/thread_start.hpp"
#include "chain/entry.hpp"       // entries_path
#include "disk/files.hpp"         // entry_file_name
#include "jit/jit_pool.hpp"  // kMaxJitRequestsInFlight
#include "jit/request.hpp"   // longest_first
#include "registry/query.hpp"  // make_chain

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln {
namespace {

using ProgressFunction = std::function<void(const PrecompileResult&, std::size_t, std::size_t)>;

// The units `kernels` name (every unit that is not linked when none is named); a kernel no unit has, or
// one of a linked unit (built only with its operator, at run time), is refused.
std::set<std::uint32_t> units_asked(const Catalog& catalog, const std::vector<std::string>& kernels) {
  std::set<std::uint32_t> units;
  for (const auto& name : kernels) {
    const KernelEntry* k = catalog.find(name);
    if (!k) throw Error(Errc::unknown_kernel, unknown_kernel_message(catalog, name));
    if (catalog.units[k->unit].linked) throw Error(Errc::no_binary, linked_unit_message(catalog, *k));
    units.insert(k->unit);
  }
  if (kernels.empty()) {
    for (std::uint32_t u = 0; u < catalog.units.size(); ++u) {
      if (!catalog.units[u].linked) units.insert(u);  // built only with their operator, at run time
    }
  }
  return units;
}

// The chain, for an architecture this machine may not have: the disk cache, the fleet's, then the JIT
// (never what is embedded, nor the PTX tier: the cache gets the unit compiled from source).
detail::TierChain precompile_chain(const Catalog& catalog, DiskCache& cache) {
  RegistryOptions options;
  options.use_embedded = false;
  options.allow_ptx = false;
  options.cache = &cache;
  options.remote = &default_remote();  // what others published is fetched; what is compiled, published
  return detail::make_chain(catalog, options);
}

// The units of one call, compiled on threads that take them in turn, longest first; their results in the
// order they end, reported from the caller's thread.
class Precompiler {
 public:
  Precompiler(const Catalog& catalog, unsigned arch, DiskCache& cache, const std::set<std::uint32_t>& units)
      : catalog_(catalog), arch_(arch), cache_(cache), chain_(precompile_chain(catalog, cache)),
        entries_(detail::entries_path(cache.config().dir)) {
    // The longest compiles first (the pool orders what it sees; this orders what it sees first).
    const std::vector<std::uint32_t> ordered = detail::longest_first(catalog, {units.begin(), units.end()});
    todo_.assign(ordered.begin(), ordered.end());
    total_ = todo_.size();
  }

  std::vector<PrecompileResult> run(unsigned jobs, const ProgressFunction& progress) {
    start_threads(jobs);
    report(progress);
    for (auto& t : threads_) t.join();
    mark_evicted();
    return std::move(done_);
  }

 private:
  // Every unit at once by default: the pool schedules them (which waits for a PCH, which builds one), and
  // it can only weigh the requests it sees (docs/DESIGN.md, "PCH across processes").
  void start_threads(unsigned jobs) {
    const unsigned width = std::max(1u, jobs ? jobs : detail::kMaxJitRequestsInFlight);
    for (unsigned i = 0; i < std::min<std::size_t>(width, total_); ++i) {
      detail::Result<std::thread> thread = detail::start_thread([this] { work(); });
      if (!thread) break;  // the threads there are take the rest
      threads_.push_back(std::move(thread).value());
    }
    if (threads_.empty()) work();  // none to be had: this one does it all, and reports after
  }

  // A thread's loop: the next unit, until none is left.
  void work() {
    for (;;) {
      std::uint32_t u;
      {
        std::lock_guard lock(mutex_);
        if (todo_.empty()) return;
        u = todo_.front();
        todo_.pop_front();
      }
      precompile_unit(u);
    }
  }

  // One unit through the chain; its result, its cache key and its entry's size in the cache (the binary's
  // where it is gone already).
  void precompile_unit(std::uint32_t u) {
    PrecompileResult r;
    std::string key;
    std::uint64_t bytes = 0;
    r.unit = std::string(catalog_.str(catalog_.units[u].name));
    const auto start = std::chrono::steady_clock::now();
    try {
      detail::PrecompiledUnit p = chain_.precompile(u, arch_);
      r = std::move(p.result);
      key = std::move(p.cache_key);
      if (r.ok && !key.empty()) {
        std::error_code ec;
        const std::uintmax_t size = std::filesystem::file_size(entries_ / detail::entry_file_name(key), ec);
        bytes = ec ? p.bytes : size;
      }
    } catch (const Error& e) {
      r.error = {e.code(), e.what()};
    } catch (const std::exception& e) {
      r.error = {Errc::compile, e.what()};
    }
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(mutex_);
    held_bytes_ += bytes;
    done_.push_back(std::move(r));
    keys_.push_back(std::move(key));
    finished_.notify_all();
  }

  // Progress from this thread: callers need not be thread-safe.
  void report(const ProgressFunction& progress) {
    std::size_t reported = 0;
    std::unique_lock lock(mutex_);
    while (reported < total_) {
      finished_.wait(lock, [&] { return done_.size() > reported; });
      while (reported < done_.size()) {
        const PrecompileResult r = done_[reported++];
        lock.unlock();
        if (progress) progress(r, reported, total_);
        lock.lock();
      }
    }
  }

  // What is in the cache now: a unit stored early may have been evicted by a later one's store, where the
  // cap is smaller than the units asked for; or removed by another process (`kiln cache clear`, prune).
  void mark_evicted() {
    for (std::size_t i = 0; i < done_.size(); ++i) {
      PrecompileResult& r = done_[i];
      std::error_code ec;
      if (!r.ok || keys_[i].empty() || std::filesystem::exists(entries_ / detail::entry_file_name(keys_[i]), ec)) continue;
      r.ok = false;
      r.evicted = true;
      r.error.code = Errc::cache;
      r.error.message = eviction_reason(r.compiled);
    }
  }

  // The cap is named only where it is the cause: set, and smaller than the entries of the units asked for.
  std::string eviction_reason(bool compiled) const {
    const std::uint64_t cap = cache_.config().max_bytes;
    const std::string kept = "the disk cache " + std::string(compiled ? "kept it" : "had it");
    if (cap != 0 && held_bytes_ > cap)
      return kept + ", then evicted it for the units stored after it: its cap (" + std::to_string(cap) +
             " bytes, KILN_CACHE_MAX_BYTES) is smaller than the units asked for (" + std::to_string(held_bytes_) +
             " bytes); raise it, or precompile fewer";
    return kept + ", then it was removed meanwhile, not for its cap (the units asked for take " +
           std::to_string(held_bytes_) + " bytes" + (cap ? ", within its " + std::to_string(cap) : "; it has none") +
           "): another process cleared, pruned or verified the cache (kiln cache clear, prune, verify)";
  }

  const Catalog& catalog_;
  const unsigned arch_;
  DiskCache& cache_;
  const detail::TierChain chain_;
  const std::filesystem::path entries_;
  std::size_t total_ = 0;
  std::vector<std::thread> threads_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable finished_;
  std::deque<std::uint32_t> todo_;
  std::vector<PrecompileResult> done_;
  std::vector<std::string> keys_;  // done_[i]'s cache key (hex), empty when it has none
  std::uint64_t held_bytes_ = 0;   // the entries of the units done, as the cache held them: what the cap saw
};

}  // namespace

std::vector<PrecompileResult> precompile(const Catalog& catalog, unsigned arch, const std::vector<std::string>& kernels,
                                         unsigned jobs, const ProgressFunction& progress) {
  const std::set<std::uint32_t> units = units_asked(catalog, kernels);
  DiskCache& cache = default_cache();
  if (!cache.usable())
    throw Error(Errc::cache, "kiln: precompile fills the disk cache, which is not in use: " + cache.unusable_reason().message);
  return Precompiler(catalog, arch, cache, units).run(jobs, progress);
}

}  // namespace kiln
