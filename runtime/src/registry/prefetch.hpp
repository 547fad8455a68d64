// Work a registry does on a thread while its context comes up (tens of milliseconds the first time in a
// process): this device's embedded cubins unpacked, so that a unit's first load finds its image ready
// instead of paying for zstd, and the disk cache opened and its first key made when a unit will need it
// (docs/DESIGN.md, "Embedded fatbins" and "Tiers").
#pragma once

#include "registry/tier.hpp"

#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <thread>

namespace kiln::detail {

class Prefetch {
 public:
  // What one registry unpacks ahead at most, in decompressed bytes; units past it are unpacked when
  // first loaded, as without a prefetch.
  static constexpr std::size_t kBudgetBytes = std::size_t(16) << 20;

  // Starts a thread that unpacks, in table order, the cubin the embedded tier would pick for `arch` of
  // each unit that has one, until `budget` bytes (none when the options turn the embedded tier off);
  // then, if some unit has no such cubin, opens the disk cache the registry would ask and makes that
  // unit's key (the cache directory walked, the compilers' record read): nothing is loaded or counted.
  // `catalog` and `options` must outlive this object. When no thread can be started, nothing is done ahead.
  Prefetch(const Catalog& catalog, unsigned arch, const RegistryOptions& options,
                   std::size_t budget = kBudgetBytes);
  // Stops the thread between two units and joins it.
  ~Prefetch();
  Prefetch(const Prefetch&) = delete;
  Prefetch& operator=(const Prefetch&) = delete;

  // The unit's image, exactly as fetch_embedded_cubin returns it, if the thread has unpacked it; each at
  // most once. Otherwise nothing, and the caller asks the tiers as usual (a unit the thread is unpacking
  // right now is unpacked twice, never waited for).
  std::optional<UnitImage> take(std::size_t unit);
  // How many images the thread has unpacked so far (for tests).
  std::size_t unpacked() const noexcept { return unpacked_.load(std::memory_order_acquire); }
  // Whether the thread made a disk cache key ahead (for tests).
  bool warmed_disk() const noexcept { return warmed_disk_.load(std::memory_order_acquire); }
  // Blocks until the thread has ended (for tests).
  void wait();

 private:
  void run(const Catalog& catalog, unsigned arch, const RegistryOptions& options, std::size_t budget);

  std::unique_ptr<std::atomic<UnitImage*>[]> ready_;
  std::size_t units_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> unpacked_{0};
  std::atomic<bool> warmed_disk_{false};
  std::thread thread_;
};

}  // namespace kiln::detail
