// The one tier chain: the order in which the registry asks tiers for a unit, walked by get() and plan().
//
//   memory (the registry's slots, before the chain) → embedded cubin → disk → remote → JIT → embedded PTX
//
// Embedded PTX comes last and only with RegistryOptions::allow_ptx: the driver compiles it, a slow
// cold start. A tier added later (PTX assembly) is one more step in tier_chain.cpp.
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
