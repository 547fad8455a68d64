// The steps in the chain (chain/tier.hpp) of the two tiers that build on the JIT's worker pool, which the
// registry puts into its chain.
#pragma once

#include "chain/tier.hpp"

namespace kiln::detail {

// The embedded PTX the device can run, assembled by kiln (jit/ptx_tier.cpp).
TierStep ptx_tier();
// The unit compiled from its source (jit/jit_tier.cpp).
TierStep jit_tier();

}  // namespace kiln::detail
