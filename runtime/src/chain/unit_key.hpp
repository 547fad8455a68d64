// The cache key of a catalog unit's binary, and whether an entry serves the unit: what the disk and remote
// tiers look up and check, and the PTX and JIT tiers publish under.
#pragma once

#include "base/file_identity.hpp"
#include "base/result.hpp"

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>  // LinkedSource

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::detail {

// The registry name of every program given at run time (their cache entries are under it); no table may
// take it (kiln-gen refuses it). The JIT pool compiles its units as untrusted input (ASLR on).
inline constexpr std::string_view kProgramRegistry = "program";

// The compilers an entry is built by, as the key names them ("13.0").
struct CompilerVersions {
  std::string nvrtc;
  std::string nvjitlink;
};

// What loading the compilers found: their versions and the files they came from (the disk cache records
// these, so that later processes know the versions without loading them: disk/compiler_versions.hpp).
struct LoadedCompilers {
  CompilerVersions versions;
  FileIdentity nvrtc, nvjitlink;
};
using LoadCompilers = Result<LoadedCompilers> (*)();

// The key of `unit`'s binary for `arch`, built by `compilers`. `code_arch`: the binary is built from code
// compiled for that older virtual architecture (the PTX tier's embedded PTX, a unit's embedded LTO-IR),
// whose CUB policies differ from `arch`'s: it gets a key of its own (CacheKeyFields::code_arch).
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, const CompilerVersions& compilers,
                        unsigned code_arch = 0);

// The key of `unit` linked with `linked_source` (Registry::get with a LinkedSource): the unit's key with
// the SHA-256 of that source added, so every operator text has entries of its own.
CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, const CompilerVersions& compilers,
                          std::string_view linked_source, unsigned code_arch = 0);

// What identifies a link's code in memory and in its key: its bytes, and whether they are text or LTO-IR.
std::string link_identity(const LinkedSource& link);

// Whether `entry` can serve unit `unit`: it names every kernel of the unit with the lowered name the
// catalog recorded (the key covers the source, so an entry that does not is foreign). The one check the
// disk tier and the JIT tier apply to what the cache hands them.
Status entry_serves_unit(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry);

}  // namespace kiln::detail
