// The disk-cache key of a catalog unit's binary: what the disk tier looks up and the JIT publishes under.
#pragma once

#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

namespace kiln::detail {

// The key of `unit`'s binary for `arch`. The compiler versions are the toolkit's kiln was built with:
// the JIT compiles with the headers bundled from that toolkit.
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch);

// Why an entry found under that key cannot serve unit `unit`: it must name every kernel of the unit with
// the lowered name the catalog recorded (the key covers the source, so a mismatch is a foreign entry).
Status entry_matches(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry);

}  // namespace kiln::detail
