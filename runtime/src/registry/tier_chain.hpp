// The one tier chain: the order in which the registry asks tiers for a unit, walked by get() and plan().
//
//   memory (the registry's slots, before the chain) → embedded cubin → disk → remote → PTX → JIT
//
// The PTX tier assembles embedded PTX the device can run (kiln's own nvJitLink, ~10x cheaper than a
// compile from source) and publishes the cubin to disk (and the remote), as the JIT does; the driver's
// own PTX JIT is never used.
#pragma once

#include "registry/tier.hpp"

#include <span>

namespace kiln::detail {

std::span<const TierStep> tier_chain();

// The first tier's binary for the unit. Throws Error(no_binary) naming the kernel, what is embedded and
// what every tier said when all miss; a tier's own errors (a failed compile) propagate.
UnitImage fetch_unit(const UnitQuery& query);

// Where fetch_unit would take the unit from, without loading; the reason when nothing would serve it.
Result<UnitProbe> probe_unit(const UnitQuery& query);

}  // namespace kiln::detail
