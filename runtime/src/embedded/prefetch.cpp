// EmbeddedPrefetch: the embedded tier's own fetch, run ahead on a thread of its own.
#include "embedded/prefetch.hpp"

#include <kiln/select.hpp>

#include <vector>

namespace kiln::detail {

EmbeddedPrefetch::EmbeddedPrefetch(const Catalog& catalog, unsigned arch, const RegistryOptions& options,
                                   std::size_t budget)
    : ready_(std::make_unique<std::atomic<UnitImage*>[]>(catalog.units.size())), units_(catalog.units.size()) {
  if (!options.use_embedded || budget == 0 || units_ == 0) return;
  thread_ = std::thread([this, &catalog, arch, &options, budget] { run(catalog, arch, options, budget); });
}

EmbeddedPrefetch::~EmbeddedPrefetch() {
  stop_.store(true, std::memory_order_relaxed);
  wait();
  for (std::size_t i = 0; i < units_; ++i) delete ready_[i].load(std::memory_order_acquire);
}

void EmbeddedPrefetch::wait() {
  if (thread_.joinable()) thread_.join();
}

std::optional<UnitImage> EmbeddedPrefetch::take(std::size_t unit) {
  if (unit >= units_) return std::nullopt;
  std::unique_ptr<UnitImage> image(ready_[unit].exchange(nullptr, std::memory_order_acq_rel));
  if (!image) return std::nullopt;
  return std::move(*image);
}

void EmbeddedPrefetch::run(const Catalog& catalog, unsigned arch, const RegistryOptions& options,
                           std::size_t budget) {
  // A kernel of each unit: what a tier query names.
  std::vector<const KernelEntry*> kernel_of(units_, nullptr);
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit < units_ && kernel_of[k.unit] == nullptr) kernel_of[k.unit] = &k;
  }
  std::size_t spent = 0;
  for (std::size_t u = 0; u < units_ && !stop_.load(std::memory_order_relaxed); ++u) {
    if (kernel_of[u] == nullptr) continue;
    const BinaryEntry* b = select_binary(catalog, catalog.units[u], arch, false);
    if (b == nullptr) continue;
    if (b->size > budget - spent) break;
    spent += b->size;
    auto image = fetch_embedded_cubin(UnitQuery{catalog, *kernel_of[u], arch, options});
    if (!image) continue;  // damaged: the tier says so (once) when the unit is asked for
    image->served_by = Tier::embedded;
    ready_[u].store(new UnitImage(std::move(image).value()), std::memory_order_release);
    unpacked_.fetch_add(1, std::memory_order_release);
  }
}

}  // namespace kiln::detail
