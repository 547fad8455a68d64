// The disk-cache key of a catalog unit's binary: what the disk tier looks up and the JIT publishes under.
#pragma once

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

namespace kiln::detail {

// The key of `unit`'s binary for `arch`. The compiler versions are the toolkit's kiln was built with:
// the JIT compiles with the headers bundled from that toolkit.
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch);

}  // namespace kiln::detail
