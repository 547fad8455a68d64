// A unit's disk-cache key from its catalog entry: registry, unit, build-time digest, arch, loaded compilers.
#include "chain/unit_key.hpp"

#include "chain/key.hpp"

namespace kiln::detail {

namespace {

CacheKeyFields unit_key_fields(const Catalog& catalog, const UnitEntry& unit, unsigned arch,
                               const CompilerVersions& compilers) {
  CacheKeyFields fields;
  fields.registry = std::string(catalog.name);
  fields.unit = std::string(catalog.str(unit.name));
  fields.source_digest = std::string(catalog.str(unit.digest));
  fields.arch = arch;
  fields.nvrtc = compilers.nvrtc;
  fields.nvjitlink = compilers.nvjitlink;
  fields.cccl = std::string(catalog.cccl_version);
  return fields;
}

}  // namespace

CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, const CompilerVersions& compilers,
                        unsigned code_arch) {
  CacheKeyFields fields = unit_key_fields(catalog, unit, arch, compilers);
  fields.code_arch = code_arch;
  return CacheKey::from(fields);
}

CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, const CompilerVersions& compilers,
                          std::string_view linked_source, unsigned code_arch) {
  CacheKeyFields fields = unit_key_fields(catalog, unit, arch, compilers);
  fields.linked = sha256_hex(linked_source);
  fields.code_arch = code_arch;
  return CacheKey::from(fields);
}

std::string link_identity(const LinkedSource& link) { return link.lto_ir ? "lto-ir\n" + link.source : link.source; }

Status entry_serves_unit(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry) {
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit) continue;
    bool found = false;
    // A program given at run time has no lowered names before its first compile: its entry's are NVRTC's.
    const std::string_view lowered = catalog.str(k.lowered);
    for (const CachedKernel& c : entry.kernels)
      found = found || (c.name == catalog.str(k.name) && (lowered.empty() ? !c.lowered.empty() : c.lowered == lowered));
    if (!found) return fail("the entry lacks kernel '" + std::string(catalog.str(k.name)) + "'");
  }
  return ok();
}

}  // namespace kiln::detail
