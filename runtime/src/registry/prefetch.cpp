// Prefetch: the chain asked ahead, on a thread of its own: the embedded and disk tiers' reads, and the
// first worker of the tier that builds.
#include "registry/prefetch.hpp"

#include "base/thread_start.hpp"
#include "chain/tier_chain.hpp"

#include <kiln/select.hpp>

#include <chrono>
#include <exception>
#include <thread>
#include <vector>

namespace kiln::detail {

Prefetch::Prefetch(const TierChain& chain, unsigned arch, std::size_t budget)
    : chain_(chain),
      arch_(arch),
      ready_(std::make_unique<std::atomic<UnitImage*>[]>(chain.catalog().units.size())),
      state_(std::make_unique<std::atomic<std::uint8_t>[]>(chain.catalog().units.size())),
      units_(chain.catalog().units.size()) {
  if (units_ == 0) return;
  // No thread to be had (a process at its limit): nothing is done ahead, every unit loads as before.
  if (Result<std::thread> thread = start_thread([this, arch, budget] { run(arch, budget); }))
    thread_ = std::move(thread).value();
}

Prefetch::~Prefetch() {
  stop_.store(true, std::memory_order_relaxed);
  wait();
  for (std::size_t i = 0; i < units_; ++i) delete ready_[i].load(std::memory_order_acquire);
}

void Prefetch::wait() {
  if (thread_.joinable()) thread_.join();
}

std::optional<UnitImage> Prefetch::take(std::size_t unit) {
  if (unit >= units_) return std::nullopt;
  std::uint8_t seen = kOpen;
  // Not begun: the thread leaves it to the caller. Being read: a read takes well under a millisecond,
  // and two at once would count a corrupt entry twice; waited for, within bounds (a stuck file system
  // costs the caller kTakeWait, then it reads the unit itself).
  if (state_[unit].compare_exchange_strong(seen, kTaken, std::memory_order_acq_rel)) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + kTakeWait;
  while (seen == kWorking && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    seen = state_[unit].load(std::memory_order_acquire);
  }
  std::unique_ptr<UnitImage> image(ready_[unit].exchange(nullptr, std::memory_order_acq_rel));
  if (!image) return std::nullopt;
  return std::move(*image);
}

bool Prefetch::claim(std::size_t unit) {
  std::uint8_t open = kOpen;
  return state_[unit].compare_exchange_strong(open, kWorking, std::memory_order_acq_rel);
}

void Prefetch::finish(std::size_t unit, std::optional<UnitImage> image) {
  if (image) ready_[unit].store(new UnitImage(std::move(*image)), std::memory_order_release);
  state_[unit].store(kDone, std::memory_order_release);
}

void Prefetch::run(unsigned arch, std::size_t budget) {
  const Catalog& catalog = chain_.catalog();
  const RegistryOptions& options = chain_.options();
  // A kernel of each unit: what a tier query names.
  std::vector<const KernelEntry*> kernel_of(units_, nullptr);
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit < units_ && kernel_of[k.unit] == nullptr) kernel_of[k.unit] = &k;
  }
  std::size_t spent = 0;
  bool full = false;                 // the budget is spent: nothing more is read ahead
  std::vector<std::size_t> to_disk;  // the units the embedded tier cannot serve
  for (std::size_t u = 0; u < units_ && !stop_.load(std::memory_order_relaxed); ++u) {
    // A linked unit is built with its operator (Registry::get with a LinkedSource), never by the tiers.
    if (kernel_of[u] == nullptr || catalog.units[u].linked) continue;
    // The embedded tier's choice, from the catalog's table alone; its compressed size counts against the budget.
    const BinaryEntry* b = options.use_embedded ? select_binary(catalog, catalog.units[u], arch, false) : nullptr;
    if (b == nullptr) {
      to_disk.push_back(u);
      continue;
    }
    if (full || b->size > budget - spent) {
      full = true;
      continue;
    }
    if (!claim(u)) continue;  // asked for already
    spent += b->size;
    auto image = chain_.ahead(chain_.query(*kernel_of[u], arch), Tier::embedded);
    // Damaged: the embedded tier has warned (once); the unit's load misses the same way.
    if (image) unpacked_.fetch_add(1, std::memory_order_release);
    finish(u, std::move(image));
  }
  // The others' disk entries, read while the budget lasts (the cache directory opened and the compilers'
  // record read on the way); the first the disk cannot serve has the JIT tier start a worker meanwhile.
  for (const std::size_t u : to_disk) {
    if (stop_.load(std::memory_order_relaxed)) return;
    const UnitQuery q = chain_.query(*kernel_of[u], arch);
    try {
      if (q.cache().usable()) {
        if (full) return;  // nothing more read, nothing more known
        if (!claim(u)) continue;  // asked for already: the caller walks the tiers
        std::optional<UnitImage> image = chain_.ahead(q, Tier::disk);
        warmed_disk_.store(true, std::memory_order_release);
        const bool hit = image.has_value();
        if (hit) {
          spent += image->bytes();
          full = spent >= budget;
          read_from_disk_.fetch_add(1, std::memory_order_release);
        }
        finish(u, std::move(image));
        if (hit) continue;
      }
      if (!jit_started_.load(std::memory_order_relaxed)) {
        chain_.prepare_build(q, Tier::disk);  // the tier that builds after the disk: the PTX and JIT tiers' workers
        jit_started_.store(true, std::memory_order_release);
      }
    } catch (const std::exception&) {
      // Whatever failed fails again, and is reported, when the tiers are asked for the unit.
      if (state_[u].load(std::memory_order_acquire) == kWorking) finish(u, std::nullopt);
    }
  }
}

}  // namespace kiln::detail
