// What a tier is asked and what it answers: the interface every tier implements, and the one question
// (UnitQuery) the registry, the prefetch, warm-up and precompile put to the chain.
//
// The tiers (embedded/, disk/, remote/, jit/ with the PTX tier) include this folder and base/ only, never
// each other or the registry: what one tier needs of another (the compilers a key names, the stores a
// build goes through) the query asks its chain (chain/tier_chain.hpp), which the registry, knowing every
// tier, builds (registry/query.cpp; docs/DESIGN.md, "Folders").
#pragma once

#include "base/result.hpp"
#include "chain/store.hpp"
#include "chain/unit_source.hpp"
#include "chain/unit_key.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::detail {

class TierChain;  // chain/tier_chain.hpp: the tiers in order, and what one tier needs of another

// The question: the unit of `kernel` (named in messages), for a device of architecture `arch`, under a
// registry's options and disk cache; with `link`, that unit linked with code given at run time
// (Registry::get with a LinkedSource), which only the disk, remote and JIT tiers serve, under a key of its own.
struct UnitQuery {
  const TierChain& chain;  // what asks, and what a tier's question to another goes through
  const Catalog& catalog;
  const KernelEntry& kernel;
  unsigned arch;
  const RegistryOptions& options;
  const LinkedSource* link = nullptr;
  // The embedded tier hands over its cubin unpacked even on a get()'s own path: after the driver refused
  // it packed (UnitImage::packed), so that the unpacking finds what is damaged and the next tier serves.
  bool unpack = false;

  // The disk cache, made on first use: a unit the embedded tier serves never opens the cache directory.
  DiskCache& cache() const;

  std::uint32_t unit_index() const noexcept { return kernel.unit; }
  // The unit's source where it was given at run time (a program's: TierChain::given), else null: the
  // tiers that build then take it from the catalog (jit/request.hpp's unit_source).
  const UnitSource* given() const noexcept;
  const UnitEntry& unit() const noexcept { return catalog.units[kernel.unit]; }

  // The unit's cache key for `arch`, built by compilers(); `code_arch`, when not 0: the binary is built from
  // code of that older virtual architecture (embedded PTX or LTO-IR), which gets a key of its own. A
  // linked query's key adds the link's digest (linked_cache_key).
  CacheKey key(unsigned code_arch = 0) const;

  // The chain's (TierChain::compilers, TierChain::stores): the NVRTC and nvJitLink this process would
  // load, as keys name them; the stores a build goes through, fastest first.
  CompilerVersions compilers() const;
  std::vector<std::unique_ptr<UnitStore>> stores() const;
};

// A unit's binary, as a tier hands it over: where it came from (Origin: the tier, the architecture of its
// code, whether the PTX tier assembled it) and the bytes.
struct UnitImage : Origin {
  // The tier of the chain that answered (set by the chain); `source` is where the binary came from: the JIT
  // tier says disk when another process built the unit while this one waited for it, remote when another
  // machine did.
  Tier tier = Tier::embedded;
  std::string label;                // for errors: "sm_90", "sm_90 from the disk cache (<key>)"
  std::string cache_key;            // a disk, remote or JIT entry's key (hex)
  std::string owned;                // the binary (a cubin), as the driver gets it; empty where `parts` hold it
  bool packed = false;              // `owned` is an embedded cubin still compressed, in a fatbin of its own,
                                    // which the driver unpacks as it loads it (docs/DESIGN.md, "Embedded fatbins")
  std::vector<CachedKernel> kernels;  // from a cache entry or a compile: each kernel's lowered name in it
                                      // (what a program given at run time learns at its first compile)
  std::vector<CachedImage> parts;   // a unit compiled in parts: one library each (CacheEntry::parts)
  Status stored = ok();             // built by this process: whether the disk cache kept it, or why not

  const void* data() const noexcept { return owned.data(); }
  std::size_t bytes() const noexcept {
    std::size_t n = owned.size();
    for (const CachedImage& part : parts) n += part.cubin.size();
    return n;
  }
  // Takes the binary and the kernels of a cache entry (what the disk, remote and JIT tiers hand over).
  void take(CacheEntry&& entry) {
    owned = std::move(entry.cubin);
    parts = std::move(entry.parts);
    kernels = std::move(entry.kernels);
  }
};

// One tier's part in the chain. A miss is a failed Result whose reason (possibly empty) goes into the
// error raised when every tier misses; a tier that cannot do what it must (a compile that fails) throws.
//   probe   where the unit would come from, without loading anything (a directory probe, or one bounded
//           EXISTS in the remote cache, at most);
//   fetch   the unit's image (the JIT and PTX tiers build it, once across threads, processes and machines);
//   ahead   (tiers that read without side effects: embedded, disk) the image read ahead of a get(),
//           counting nothing: `served` counts it once it serves (registry/prefetch.hpp);
//   prepare (tiers that build) get ready for a build the prefetch sees coming: a worker started.
struct TierStep {
  Tier tier;
  Result<Origin> (*probe)(const UnitQuery&);
  Result<UnitImage> (*fetch)(const UnitQuery&);
  Result<UnitImage> (*ahead)(const UnitQuery&) = nullptr;
  void (*served)(const UnitQuery&) = nullptr;
  void (*prepare)(const UnitQuery&) = nullptr;
};

}  // namespace kiln::detail
