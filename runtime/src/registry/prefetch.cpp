// Prefetch: the embedded tier's own fetch, and the disk tier's first key, run ahead on a thread of its own.
#include "registry/prefetch.hpp"

#include "disk/unit_key.hpp"

#include <kiln/select.hpp>

#include <exception>
#include <system_error>
#include <vector>

namespace kiln::detail {

Prefetch::Prefetch(const Catalog& catalog, unsigned arch, const RegistryOptions& options, std::size_t budget)
    : ready_(std::make_unique<std::atomic<UnitImage*>[]>(catalog.units.size())), units_(catalog.units.size()) {
  if (units_ == 0) return;
  try {
    thread_ = std::thread([this, &catalog, arch, &options, budget] { run(catalog, arch, options, budget); });
  } catch (const std::system_error&) {
    // No thread to be had (a process at its limit): nothing is done ahead, every unit loads as before.
  }
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
  std::unique_ptr<UnitImage> image(ready_[unit].exchange(nullptr, std::memory_order_acq_rel));
  if (!image) return std::nullopt;
  return std::move(*image);
}

void Prefetch::run(const Catalog& catalog, unsigned arch, const RegistryOptions& options, std::size_t budget) {
  // A kernel of each unit: what a tier query names.
  std::vector<const KernelEntry*> kernel_of(units_, nullptr);
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit < units_ && kernel_of[k.unit] == nullptr) kernel_of[k.unit] = &k;
  }
  std::size_t spent = 0;
  bool full = false;                     // the budget is spent: nothing more is unpacked
  const KernelEntry* to_disk = nullptr;  // the first unit the embedded tier cannot serve
  for (std::size_t u = 0; u < units_ && !stop_.load(std::memory_order_relaxed); ++u) {
    // A linked unit is built with its operator (Registry::get with a LinkedSource), never by the tiers.
    if (kernel_of[u] == nullptr || catalog.units[u].linked) continue;
    const BinaryEntry* b = options.use_embedded ? select_binary(catalog, catalog.units[u], arch, false) : nullptr;
    if (b == nullptr) {
      if (to_disk == nullptr) to_disk = kernel_of[u];
      continue;
    }
    if (full || b->size > budget - spent) {
      full = true;
      continue;
    }
    spent += b->size;
    auto image = fetch_embedded_cubin(UnitQuery{catalog, *kernel_of[u], arch, options});
    if (!image) continue;  // damaged: fetch_embedded_cubin has warned (once); the unit's load misses the same way
    image->served_by = Tier::embedded;
    ready_[u].store(new UnitImage(std::move(image).value()), std::memory_order_release);
    unpacked_.fetch_add(1, std::memory_order_release);
  }
  if (to_disk == nullptr || stop_.load(std::memory_order_relaxed)) return;
  try {
    const UnitQuery q{catalog, *to_disk, arch, options};
    DiskCache& cache = q.cache();
    if (!cache.usable()) return;
    (void)unit_cache_key(catalog, q.unit(), arch, cache);
    warmed_disk_.store(true, std::memory_order_release);
  } catch (const std::exception&) {
    // Whatever failed fails again, and is reported, when the disk tier is asked for the unit.
  }
}

}  // namespace kiln::detail
