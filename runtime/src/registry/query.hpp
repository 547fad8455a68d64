// The registry's wiring of the tiers: what a UnitQuery asks that one tier provides another (the
// compilers a key names, the stores a build goes through), and keys for a unit named outside a query.
#pragma once

#include "chain/tier.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <string_view>

namespace kiln::detail {

// The NVRTC and nvJitLink versions cache keys name: from `cache`'s record (disk/compiler_versions.hpp),
// else by loading them with the JIT's loader; once per process.
CompilerVersions compilers_for(DiskCache& cache);

// unit_cache_key and linked_cache_key with compilers_for(cache): the keys the tiers use, for a unit named
// by its catalog entry (Registry::cache_key, the command line, tests).
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                        unsigned code_arch = 0);
CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                          std::string_view linked_source, unsigned code_arch = 0);

// The first kernel of unit `unit`: what a query about a unit names in messages.
const KernelEntry* first_kernel_of(const Catalog& catalog, std::uint32_t unit);

}  // namespace kiln::detail
