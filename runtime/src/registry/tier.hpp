// What a tier answers when the registry asks it for a unit's binary: the interface every tier implements.
#pragma once

#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace kiln::detail {

// The question: the unit of `kernel` (named in messages), for a device of architecture `arch`, under a
// registry's options and disk cache.
struct UnitQuery {
  const Catalog& catalog;
  const KernelEntry& kernel;
  unsigned arch;
  const RegistryOptions& options;

  // The disk cache, made on first use: a unit the embedded tier serves never opens the cache directory.
  DiskCache& cache() const { return options.cache ? *options.cache : default_cache(); }

  std::uint32_t unit_index() const noexcept { return kernel.unit; }
  const UnitEntry& unit() const noexcept { return catalog.units[kernel.unit]; }
};

// Where a unit would come from, found without loading anything (a directory probe, or one bounded
// EXISTS in the remote cache, at most).
struct UnitProbe {
  Tier source = Tier::embedded;
  unsigned arch = 0;
  bool ptx = false;
};

// A unit's binary, as a tier hands it over.
struct UnitImage {
  Tier served_by = Tier::embedded;  // the tier of the chain that answered (set by the chain)
  Tier source = Tier::embedded;     // where the binary came from: the JIT tier says disk when another
                                    // process built the unit while this one waited for it, remote when
                                    // another machine did
  unsigned arch = 0;
  bool ptx = false;
  std::string label;                // for errors: "sm_90", "sm_90 from the disk cache (<key>)"
  std::string cache_key;            // a disk, remote or JIT entry's key (hex)
  std::string owned;                // the binary (a cubin), as the driver gets it

  const void* data() const noexcept { return owned.data(); }
};

// One tier's part in the chain. A miss is a failed Result whose reason (possibly empty) goes into the
// error raised when every tier misses; a tier that cannot do what it must (a compile that fails) throws.
struct TierStep {
  Tier tier;
  Result<UnitProbe> (*probe)(const UnitQuery&);
  Result<UnitImage> (*fetch)(const UnitQuery&);
};

// The tiers, one step each (registry/tier_chain.cpp lists them in order).
Result<UnitProbe> probe_embedded_cubin(const UnitQuery&);
Result<UnitImage> fetch_embedded_cubin(const UnitQuery&);
Result<UnitProbe> probe_disk(const UnitQuery&);
Result<UnitImage> fetch_disk(const UnitQuery&);
Result<UnitProbe> probe_remote(const UnitQuery&);
Result<UnitImage> fetch_remote(const UnitQuery&);
Result<UnitProbe> probe_ptx(const UnitQuery&);
Result<UnitImage> fetch_ptx(const UnitQuery&);
Result<UnitProbe> probe_jit(const UnitQuery&);
Result<UnitImage> fetch_jit(const UnitQuery&);

// What the registry's prefetch (registry/prefetch.hpp) does ahead, while the context comes up:
// fetch_disk, counting neither the miss (the chain counts its own when it asks) nor the hit, which
// count_disk_hit counts once the image serves a get();
Result<UnitImage> read_disk_ahead(const UnitQuery&);
void count_disk_hit(const UnitQuery&);
// and the JIT tier's first worker started, its compilers loaded, for a unit the tiers before it missed.
void start_jit_ahead(const UnitQuery&);

}  // namespace kiln::detail
