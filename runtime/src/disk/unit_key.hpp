// The disk-cache key of a catalog unit's binary, and whether an entry serves the unit: what the disk tier
// looks up and checks, and the JIT publishes under.
#pragma once

#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <cstdint>

namespace kiln::detail {

// The key of `unit`'s binary for `arch`. The compiler versions are the toolkit's kiln was built with:
// the JIT compiles with the headers bundled from that toolkit.
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch);

// Whether `entry` can serve unit `unit`: it names every kernel of the unit with the lowered name the
// catalog recorded (the key covers the source, so an entry that does not is foreign). The one check the
// disk tier and the JIT tier apply to what the cache hands them.
Status entry_serves_unit(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry);

}  // namespace kiln::detail
