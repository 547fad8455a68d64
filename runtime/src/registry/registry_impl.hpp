// What a Registry holds: its catalog and device, a library per unit, a published slot per kernel, its
// counters, and what is made on first use (the prefetch, warm-up, units linked with run-time code).
#pragma once

#include "chain/tier_chain.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/registry.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {
class Prefetch;  // registry/prefetch.hpp: this device's images read ahead
}  // namespace detail

class Registry::Impl {
 public:
  // `given`: the source of the catalog's one unit, given at run time (a program's; TierChain).
  Impl(const Catalog& catalog, int device, RegistryOptions options,
       std::shared_ptr<const detail::UnitSource> given = nullptr);
  ~Impl();

  Kernel get(std::string_view name);
  Kernel get(std::string_view name, const LinkedSource& link);  // registry/linked.cpp
  LoadPlan plan(std::string_view name);
  DeviceInfo device();
  CUcontext context();
  RegistryStats stats() const noexcept;
  CacheKey cache_key(std::string_view name, unsigned arch);
  // registry/warmup.cpp
  void request_warmup(const std::vector<std::string>& names);
  std::vector<std::string> ensure_warm(const std::vector<std::string>& names, std::chrono::milliseconds timeout);
  void precompile_all();
  WarmupStatus status();
  // What owns this registry where its kernels may outlive their owner's handle (a program's state): every
  // kernel get() hands out holds it (Kernel::keeps_loaded). Set before the first get().
  void kept_by(std::weak_ptr<const void> owner) { owner_ = std::move(owner); }

  const Catalog& catalog_;

 private:
  struct Warmup;       // registry/warmup.hpp
  struct LinkedUnits;  // registry/linked_units.hpp

  // A kernel made launchable, and the context (its cuCtxGetId) its CUfunction belongs to. Immutable.
  struct Loaded {
    Kernel kernel;
    std::uint64_t context_id = 0;  // never 0 for a live context
  };
  // Per kernel: the published Loaded. Written under the unit's mutex (once, and again after a context
  // reset, the old one kept until the registry ends), read without a lock.
  struct Slot {
    std::atomic<const Loaded*> loaded{nullptr};
  };
  // Per unit: the library loaded from one of its binaries (one per part, in order, for a unit compiled in
  // parts: UnitImage::parts), and that binary as its tier handed it over (owned here for the libraries'
  // life). Guarded by `mutex`, which also serialises the first loads of the unit's kernels.
  struct UnitState {
    std::mutex mutex;
    std::vector<CUlibrary> libraries;  // empty until the unit is loaded
    detail::UnitImage image;
  };

  void ensure_device();
  std::uint64_t live_context_id();
  Kernel load(const KernelEntry& entry, std::size_t index);
  void load_unit(UnitState& unit, const KernelEntry& entry);
  // An embedded cubin handed to the driver packed (UnitImage::packed) loaded as the unit's library, its
  // kernel found in it; false, nothing kept, when the driver refuses it.
  bool load_packed(UnitState& unit, const KernelEntry& entry, const std::string& what);
  detail::UnitQuery query(const KernelEntry& entry, const LinkedSource* link = nullptr);
  void count_served(const detail::UnitImage& image);
  std::string_view lowered_in(const UnitState& unit, const KernelEntry& entry) const;
  CUlibrary library_of(const UnitState& unit, const KernelEntry& entry) const;
  std::string image_identity(const detail::UnitImage& image, std::uint32_t unit) const;

  const KernelEntry* find(std::string_view name) const noexcept;  // through names_

  // get() without the owner: the kernel as published, which holds none (a published kernel holding it
  // would keep the registry from ever ending). The warm-up's threads load through it: one of them
  // holding the owner last would end the registry, and join itself.
  Kernel ready(std::string_view name);

  std::weak_ptr<const void> owner_;  // kept_by
  std::vector<std::uint32_t> names_;  // the kernels by name, hashed (registry/name_index.hpp)
  int ordinal_;
  RegistryOptions options_;
  detail::TierChain chain_;  // the tiers after memory, in order (registry/query.hpp's make_chain)
  std::once_flag device_once_;
  CUdevice cu_device_ = 0;
  CUcontext context_ = nullptr;
  DeviceInfo info_;
  std::unique_ptr<UnitState[]> units_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<std::uint64_t> unit_loads_{0};
  std::atomic<std::uint64_t> kernel_loads_{0};
  std::atomic<std::uint64_t> disk_loads_{0};
  std::atomic<std::uint64_t> remote_loads_{0};
  std::atomic<std::uint64_t> jit_compiles_{0};
  std::atomic<std::uint64_t> context_reloads_{0};
  std::mutex retired_mutex_;
  std::vector<std::unique_ptr<const Loaded>> retired_;  // replaced after a context reset; readers may still hold them
  std::unique_ptr<Warmup> warmup_;  // created on the first warm-up call
  std::unique_ptr<detail::Prefetch> prefetch_;  // started when the device is first asked for
  std::unique_ptr<LinkedUnits> linked_;  // units linked with run-time code (registry/linked_units.hpp)
  std::mutex warmup_mutex_;
};

}  // namespace kiln
