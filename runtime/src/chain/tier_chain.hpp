// The one tier chain: the order in which a unit is looked for, and the only code that walks it.
//
//   1 memory (the registry's slots, before the chain) → 2 embedded cubin → 3 disk → 4 remote → 5 PTX → 6 JIT
//
// An object the registry builds (registry/query.hpp's make_chain) for a catalog and its options: the
// tiers' steps in order, the compilers a key names and the stores a build goes through are its members,
// so that a tier asks another only through it. get() and plan(), the prefetch, warm-up, precompile,
// linked units and `kiln why` all ask it. The PTX tier assembles embedded PTX the device can run (kiln's
// own nvJitLink, ~10x cheaper than a compile from source) and publishes the cubin as the JIT does; the
// driver's own PTX JIT is never used.
#pragma once

#include "chain/tier.hpp"
#include "chain/unit_source.hpp"

#include <kiln/precompile.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

// What the registry puts into a chain: each tier's step, in the chain's order, and what one tier needs
// of another, from the tiers that provide it.
struct ChainParts {
  std::vector<TierStep> tiers;
  // The process's disk cache, for options that name none (RegistryOptions::cache).
  DiskCache& (*default_cache)() = nullptr;
  // The NVRTC and nvJitLink versions keys name, for the disk cache whose record knows them.
  CompilerVersions (*compilers)(DiskCache&) = nullptr;
  // The stores a build goes through, fastest first: the disk cache, then the remote cache when the
  // options use one (chain/store.hpp).
  std::vector<std::unique_ptr<UnitStore>> (*stores)(DiskCache&, const RegistryOptions&) = nullptr;
};

// Where a unit would come from, as `kiln why` tells it: the first tier that answers its probe.
struct Explanation {
  bool available = false;   // some tier would serve it; else `reason` says why none would
  Origin origin;            // that tier (disk where an entry it has serves, as the PTX tier's probe says)
  bool compiles = false;    // the tier builds it (the PTX or the JIT tier): nothing cached has its key
  CacheKey key;             // the key it is, or would be, stored under (none for an embedded cubin)
  std::string reason;
};

// One unit precompiled (kiln::precompile, precompile_linked, Program::precompile): what it did, but the
// time, which the caller measures.
struct PrecompiledUnit {
  PrecompileResult result;
  std::string cache_key;    // its entry's key (hex), empty when it has none
  std::uint64_t bytes = 0;  // its binary's size
};

class TierChain {
 public:
  // `catalog` must outlive the chain. `given`: the source of the catalog's one unit, given at run time (a
  // program's), which the tiers that build compile; without it they take each unit's from the catalog.
  TierChain(const Catalog& catalog, const RegistryOptions& options, ChainParts parts,
            std::shared_ptr<const UnitSource> given = nullptr);
  TierChain(const TierChain&) = delete;
  TierChain& operator=(const TierChain&) = delete;

  const Catalog& catalog() const noexcept { return catalog_; }
  const RegistryOptions& options() const noexcept { return options_; }
  const UnitSource* given() const noexcept { return given_.get(); }
  // The disk cache, made on first use: a unit the embedded tier serves never opens the cache directory.
  DiskCache& cache() const;
  // The compilers keys name: known from the disk cache's record without loading them, while it holds
  // (disk/compiler_versions.hpp); asked once per chain.
  CompilerVersions compilers() const;
  std::vector<std::unique_ptr<UnitStore>> stores() const;

  // The question about `kernel`'s unit for a device of architecture `arch`, linked with `link` if given.
  UnitQuery query(const KernelEntry& kernel, unsigned arch, const LinkedSource* link = nullptr) const;

  // The first tier's binary for the unit. Throws Error(no_binary) naming the kernel, what is embedded and
  // what every tier said when all miss; a tier's own errors (a failed compile) propagate.
  UnitImage fetch(const UnitQuery& query) const;
  // Where fetch would take the unit from, without loading; the reason when nothing would serve it.
  Result<Origin> probe(const UnitQuery& query) const;
  // probe(), with the key the unit is found or built under: what `kiln why` says.
  Explanation explain(const KernelEntry& kernel, unsigned arch) const;

  // For a read ahead of fetch (registry/prefetch.hpp): `tier`'s image when that tier reads without side
  // effects (TierStep::ahead) and has it, counting nothing; served() counts it once it serves a get().
  std::optional<UnitImage> ahead(const UnitQuery& query, Tier tier) const;
  void served(const UnitQuery& query, const UnitImage& image) const;
  // The first tier after `after` that builds gets ready for a build (TierStep::prepare: a worker started).
  void prepare_build(const UnitQuery& query, Tier after) const;

  // Unit `unit` fetched for `arch` (with `link`, for a linked unit) into the stores, as precompile asks:
  // the chain's options say which tiers (precompile turns the embedded and PTX tiers off, so that the
  // cache gets the unit compiled from source). Throws what fetch throws.
  PrecompiledUnit precompile(std::uint32_t unit, unsigned arch, const LinkedSource* link = nullptr) const;

 private:
  const TierStep* step_of(Tier tier) const;

  const Catalog& catalog_;
  RegistryOptions options_;
  ChainParts parts_;
  std::shared_ptr<const UnitSource> given_;
  mutable std::once_flag compilers_once_;
  mutable CompilerVersions compilers_;
};

}  // namespace kiln::detail
