// The registry's wiring of the tiers: a query's compilers and stores, from the disk, remote and JIT tiers.
#include "registry/query.hpp"

#include "disk/cache_internal.hpp"     // disk_store
#include "disk/compiler_versions.hpp"
#include "jit/compiler/nvrtc_library.hpp"  // load_compilers: what is loaded is what the key names
#include "remote/remote_tier.hpp"      // remote_of, fleet_store

namespace kiln::detail {

CompilerVersions compilers_for(DiskCache& cache) { return compiler_versions(cache, load_compilers); }

CompilerVersions UnitQuery::compilers() const { return compilers_for(cache()); }

std::vector<std::unique_ptr<UnitStore>> UnitQuery::stores() const {
  std::vector<std::unique_ptr<UnitStore>> stores;
  stores.push_back(disk_store(cache()));
  if (RemoteCache* remote = remote_of(options)) stores.push_back(fleet_store(*remote));
  return stores;
}

CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                        unsigned code_arch) {
  return unit_cache_key(catalog, unit, arch, compilers_for(cache), code_arch);
}

CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                          std::string_view linked_source, unsigned code_arch) {
  return linked_cache_key(catalog, unit, arch, compilers_for(cache), linked_source, code_arch);
}

const KernelEntry* first_kernel_of(const Catalog& catalog, std::uint32_t unit) {
  for (const KernelEntry& k : catalog.kernels)
    if (k.unit == unit) return &k;
  return nullptr;
}

}  // namespace kiln::detail
