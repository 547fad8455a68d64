// The registry's wiring of the tiers: the chain it builds (the tiers in order, what one tier provides
// another: the compilers a key names, the stores a build goes through), and keys for a unit named outside
// a query.
#pragma once

#include "chain/tier_chain.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <string_view>

namespace kiln::detail {

// The chain for `catalog` under `options`: memory is the registry's, before it; then embedded, disk,
// remote, PTX, JIT. `catalog` must outlive it; `given`, a program's unit source (TierChain).
TierChain make_chain(const Catalog& catalog, const RegistryOptions& options,
                     std::shared_ptr<const UnitSource> given = nullptr);

// The NVRTC and nvJitLink versions cache keys name: from `cache`'s record (disk/compiler_versions.hpp),
// else by loading them with the JIT's loader; once per process.
CompilerVersions compilers_for(DiskCache& cache);

// unit_cache_key and linked_cache_key with compilers_for(cache): the keys the tiers use, for a unit named
// by its catalog entry (the command line, tests).
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                        unsigned code_arch = 0);
CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                          std::string_view linked_source, unsigned code_arch = 0);

}  // namespace kiln::detail
