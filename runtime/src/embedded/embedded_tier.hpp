// The embedded tier's step in the chain (chain/tier.hpp), which the registry puts into its chain.
#pragma once

#include "chain/tier.hpp"

namespace kiln::detail {

// The cubin built for the device, read out of the unit's fatbin in the binary.
TierStep embedded_tier();

}  // namespace kiln::detail
