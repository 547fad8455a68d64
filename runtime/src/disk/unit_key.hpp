// The disk-cache key of a catalog unit's binary, and whether an entry serves the unit: what the disk tier
// looks up and checks, and the JIT publishes under.
#pragma once

#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::detail {

// The compilers an entry is built by, as the key names them ("13.0").
struct CompilerVersions {
  std::string nvrtc;
  std::string nvjitlink;
};

// The key of `unit`'s binary for `arch`, built by `compilers`.
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, const CompilerVersions& compilers);
// The same with the NVRTC and nvJitLink this process would load (disk/compiler_versions.hpp): known from
// `cache`'s record of them without loading them, when it still holds. `code_arch`: the binary is built
// from code compiled for that older virtual architecture (the PTX tier's embedded PTX), whose CUB
// policies differ from `arch`'s: it gets a key of its own (CacheKeyFields::code_arch).
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                        unsigned code_arch = 0);

// The key of `unit` linked with `linked_source` (Registry::get with a LinkedSource): the unit's key with
// the SHA-256 of that source added, so every operator text has entries of its own. `code_arch`: the
// unit's embedded LTO-IR is of that older architecture.
CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                          std::string_view linked_source, unsigned code_arch = 0);

// Whether `entry` can serve unit `unit`: it names every kernel of the unit with the lowered name the
// catalog recorded (the key covers the source, so an entry that does not is foreign). The one check the
// disk tier and the JIT tier apply to what the cache hands them.
Status entry_serves_unit(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry);

}  // namespace kiln::detail
