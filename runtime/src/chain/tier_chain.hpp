// The one tier chain: the order in which a unit is looked for, and the only code that walks it.
//
//   1 memory (the registry's slots, before the chain) → 2 embedded cubin → 3 disk → 4 remote → 5 PTX → 6 JIT
//
// get() and plan(), the prefetch, warm-up, precompile and linked units all ask it. The PTX tier
// assembles embedded PTX the device can run (kiln's own nvJitLink, ~10x cheaper than a compile from
// source) and publishes the cubin as the JIT does; the driver's own PTX JIT is never used.
#pragma once

#include "chain/tier.hpp"

#include <optional>

namespace kiln::detail {

// The first tier's binary for the unit. Throws Error(no_binary) naming the kernel, what is embedded and
// what every tier said when all miss; a tier's own errors (a failed compile) propagate.
UnitImage fetch_unit(const UnitQuery& query);

// Where fetch_unit would take the unit from, without loading; the reason when nothing would serve it.
Result<Origin> probe_unit(const UnitQuery& query);

// For a read ahead of fetch_unit (registry/prefetch.hpp): `tier`'s image when that tier reads without side
// effects (TierStep::ahead) and has it, counting nothing; served() counts it once it serves a get().
std::optional<UnitImage> fetch_ahead(const UnitQuery& query, Tier tier);
void served(const UnitQuery& query, const UnitImage& image);
// The first tier after `after` that builds gets ready for a build (TierStep::prepare: a worker started).
void prepare_build(const UnitQuery& query, Tier after);

}  // namespace kiln::detail
