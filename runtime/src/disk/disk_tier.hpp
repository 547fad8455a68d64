// The disk tier's step in the chain (chain/tier.hpp), which the registry puts into its chain.
#pragma once

#include "chain/tier.hpp"

namespace kiln::detail {

// The disk cache's entry for the unit and architecture, validated and checked against the catalog.
TierStep disk_tier();

}  // namespace kiln::detail
