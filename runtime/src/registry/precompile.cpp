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
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kiln {

std::vector<PrecompileResult> precompile(
    const Catalog& catalog, unsigned arch, const std::vector<std::string>& kernels, unsigned jobs,
    const std::function<void(const PrecompileResult&, std::size_t, std::size_t)>& progress) {
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
  DiskCache& cache = default_cache();
  if (!cache.usable())
    throw Error(Errc::cache, "kiln: precompile fills the disk cache, which is not in use: " + cache.unusable_reason().message);
  RemoteCache& remote = default_remote();  // what others published is fetched; what is compiled, published
  RegistryOptions options;
  options.use_embedded = false;
  options.allow_ptx = false;
  options.cache = &cache;
  options.remote = &remote;
  const detail::TierChain chain = detail::make_chain(catalog, options);

  // The longest compiles first (the pool orders what it sees; this orders what it sees first).
  const std::vector<std::uint32_t> ordered = detail::longest_first(catalog, {units.begin(), units.end()});
  std::deque<std::uint32_t> todo(ordered.begin(), ordered.end());
  std::vector<PrecompileResult> done;
  std::vector<std::string> keys;  // done[i]'s cache key (hex), empty when it has none
  std::uint64_t held_bytes = 0;   // the entries of the units done, as the cache held them: what the cap saw
  const std::filesystem::path entries = detail::entries_path(cache.config().dir);
  std::mutex mutex;
  std::condition_variable finished;
  const auto work = [&] {
    for (;;) {
      std::uint32_t u;
      {
        std::lock_guard lock(mutex);
        if (todo.empty()) return;
        u = todo.front();
        todo.pop_front();
      }
      PrecompileResult r;
      std::string key;
      std::uint64_t bytes = 0;  // its entry's size in the cache (the binary's where it is gone already)
      r.unit = std::string(catalog.str(catalog.units[u].name));
      const auto start = std::chrono::steady_clock::now();
      try {
        // The chain, for an architecture this machine may not have: the disk cache, the fleet's, then the
        // JIT (never what is embedded, nor the PTX tier: the cache gets the unit compiled from source).
        detail::PrecompiledUnit p = chain.precompile(u, arch);
        r = std::move(p.result);
        key = std::move(p.cache_key);
        if (r.ok && !key.empty()) {
          std::error_code ec;
          const std::uintmax_t size = std::filesystem::file_size(entries / detail::entry_file_name(key), ec);
          bytes = ec ? p.bytes : size;
        }
      } catch (const Error& e) {
        r.error = {e.code(), e.what()};
      } catch (const std::exception& e) {
        r.error = {Errc::compile, e.what()};
      }
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard lock(mutex);
      held_bytes += bytes;
      done.push_back(std::move(r));
      keys.push_back(std::move(key));
      finished.notify_all();
    }
  };
  const std::size_t total = todo.size();
  // Every unit at once by default: the pool schedules them (which waits for a PCH, which builds one),
  // and it can only weigh the requests it sees (docs/DESIGN.md, "PCH across processes").
  const unsigned width = std::max(1u, jobs ? jobs : detail::kMaxJitRequestsInFlight);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < std::min<std::size_t>(width, total); ++i) {
    detail::Result<std::thread> thread = detail::start_thread(work);
    if (!thread) break;  // the threads there are take the rest
    threads.push_back(std::move(thread).value());
  }
  if (threads.empty()) work();  // none to be had: this one does it all, and reports after
  // Progress from this thread: callers need not be thread-safe.
  std::size_t reported = 0;
  {
    std::unique_lock lock(mutex);
    while (reported < total) {
      finished.wait(lock, [&] { return done.size() > reported; });
      while (reported < done.size()) {
        const PrecompileResult r = done[reported++];
        lock.unlock();
        if (progress) progress(r, reported, total);
        lock.lock();
      }
    }
  }
  for (auto& t : threads) t.join();
  // What is in the cache now: a unit stored early may have been evicted by a later one's store, where the
  // cap is smaller than the units asked for; or removed by another process (`kiln cache clear`, prune).
  // The cap is named only where it is the cause: set, and smaller than the entries of the units asked for.
  const std::uint64_t cap = cache.config().max_bytes;
  for (std::size_t i = 0; i < done.size(); ++i) {
    PrecompileResult& r = done[i];
    std::error_code ec;
    if (!r.ok || keys[i].empty() || std::filesystem::exists(entries / detail::entry_file_name(keys[i]), ec)) continue;
    r.ok = false;
    r.evicted = true;
    r.error.code = Errc::cache;
    if (cap != 0 && held_bytes > cap) {
      r.error.message = "the disk cache " + std::string(r.compiled ? "kept it" : "had it") +
                ", then evicted it for the units stored after it: its cap (" + std::to_string(cap) +
                " bytes, KILN_CACHE_MAX_BYTES) is smaller than the units asked for (" + std::to_string(held_bytes) +
                " bytes); raise it, or precompile fewer";
    } else {
      r.error.message = "the disk cache " + std::string(r.compiled ? "kept it" : "had it") +
                ", then it was removed meanwhile, not for its cap (the units asked for take " +
                std::to_string(held_bytes) + " bytes" + (cap ? ", within its " + std::to_string(cap) : "; it has none") +
                "): another process cleared, pruned or verified the cache (kiln cache clear, prune, verify)";
    }
  }
  return done;
}

}  // namespace kiln
