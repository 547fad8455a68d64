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
    // A program given at run time has no lowered names in its catalog, and none can be put there: they
    // are NVRTC's (nvrtcGetLoweredName), which answers only after compiling the program, the very compile
    // an entry spares; a C++ kernel's is its mangled name, which depends on declarations only the
    // compiler resolves (namespaces, aliases, template arguments), and may differ by architecture (a
    // parameter type under #if __CUDA_ARCH__), so one compile's names do not bind another's. Its
    // entry's names are taken as that compile recorded them: each non-empty, and (check_entry, which an
    // entry read from a cache has passed) a kernel symbol of the entry's cubin. An entry that named
    // another kernel of its cubin was written under the program's key, which covers its source and name
    // expressions: whoever could write that could write any cubin there as well.
    const std::string_view lowered = catalog.str(k.lowered);
    for (const CachedKernel& c : entry.kernels)
      found = found || (c.name == catalog.str(k.name) && (lowered.empty() ? !c.lowered.empty() : c.lowered == lowered));
    if (!found) return fail("the entry lacks kernel '" + std::string(catalog.str(k.name)) + "'");
  }
  return ok();
}

}  // namespace kiln::detail
