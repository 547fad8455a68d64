// Work a registry does on a thread while its context comes up (tens of milliseconds the first time in a
// process): this device's embedded cubins unpacked, and the disk entries of the units that have none
// read, so that a unit's first load finds its image ready instead of paying for zstd or the cache; and,
// when a unit is on neither, the JIT tier's first worker started, its compilers loaded (docs/DESIGN.md,
// "Embedded fatbins", "Tiers" and "A cold compile's first worker").
#pragma once

#include "chain/tier_chain.hpp"

#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

namespace kiln::detail {

class Prefetch {
 public:
  // What one registry unpacks ahead at most, in decompressed bytes; units past it are unpacked when
  // first loaded, as without a prefetch.
  static constexpr std::size_t kBudgetBytes = std::size_t(16) << 20;

  // Starts a thread that asks `chain` ahead (TierChain::ahead): in table order, the
  // cubin the embedded tier would pick for `arch` of each unit that has one (none when the options turn
  // the embedded tier off); then the disk tier's entry of each unit that has no such cubin (nothing
  // counted until it serves), both until `budget` bytes; and has the tier that builds after the disk get
  // ready (prepare_build: a JIT worker started) for the first of those the disk does not have, or all of
  // them when the cache is not in use. Nothing is loaded into a context. `chain` must outlive this
  // object. When no thread can be started, nothing is done ahead.
  Prefetch(const TierChain& chain, unsigned arch, std::size_t budget = kBudgetBytes);
  // Stops the thread between two units and joins it.
  ~Prefetch();
  Prefetch(const Prefetch&) = delete;
  Prefetch& operator=(const Prefetch&) = delete;

  // The unit's image, exactly as the embedded or the disk tier's fetch returns it (tier says which),
  // if the thread has it; each at most once. The caller counts it as served (TierChain::served). Otherwise nothing, and the caller
  // asks the tiers as usual: a unit the thread has not begun is then never read by it, and one it is
  // reading right now is waited for, at most kTakeWait.
  std::optional<UnitImage> take(std::size_t unit);
  static constexpr auto kTakeWait = std::chrono::seconds(1);
  // How many images the thread has unpacked so far, and read from disk (for tests).
  std::size_t unpacked() const noexcept { return unpacked_.load(std::memory_order_acquire); }
  std::size_t read_from_disk() const noexcept { return read_from_disk_.load(std::memory_order_acquire); }
  // Whether the thread asked the JIT tier to start a worker ahead (for tests).
  bool jit_started() const noexcept { return jit_started_.load(std::memory_order_acquire); }
  // Whether the thread asked the disk cache for an entry (for tests).
  bool warmed_disk() const noexcept { return warmed_disk_.load(std::memory_order_acquire); }
  // Blocks until the thread has ended (for tests).
  void wait();

 private:
  void run(unsigned arch, std::size_t budget);
  // A unit's state: open, then either the thread works on it and is done, or take() came first.
  enum : std::uint8_t { kOpen, kWorking, kDone, kTaken };
  bool claim(std::size_t unit);  // open -> working, for the thread
  void finish(std::size_t unit, std::optional<UnitImage> image);  // working -> done

  const TierChain& chain_;
  unsigned arch_;
  std::unique_ptr<std::atomic<UnitImage*>[]> ready_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> state_;
  std::size_t units_;
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> unpacked_{0};
  std::atomic<std::size_t> read_from_disk_{0};
  std::atomic<bool> warmed_disk_{false};
  std::atomic<bool> jit_started_{false};
  std::thread thread_;
};

}  // namespace kiln::detail
