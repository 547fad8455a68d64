// The registry's wiring of the tiers: its chain, with the compilers and stores from the disk, remote and
// JIT tiers.
#include "registry/query.hpp"

#include "disk/cache_internal.hpp"     // disk_store
#include "disk/compiler_versions.hpp"
#include "disk/disk_tier.hpp"
#include "embedded/embedded_tier.hpp"
#include "jit/compiler/nvrtc_library.hpp"  // load_compilers: what is loaded is what the key names
#include "jit/jit_tier.hpp"
#include "remote/remote_tier.hpp"      // remote_tier, remote_of, fleet_store

namespace kiln::detail {

namespace {

std::vector<std::unique_ptr<UnitStore>> stores_of(DiskCache& cache, const RegistryOptions& options) {
  std::vector<std::unique_ptr<UnitStore>> stores;
  stores.push_back(disk_store(cache));
  if (RemoteCache* remote = remote_of(options)) stores.push_back(fleet_store(*remote));
  return stores;
}

ChainParts chain_parts() {
  ChainParts parts;
  parts.tiers = {embedded_tier(), disk_tier(), remote_tier(), ptx_tier(), jit_tier()};
  parts.default_cache = default_cache;
  parts.compilers = compilers_for;
  parts.stores = stores_of;
  return parts;
}

}  // namespace

TierChain make_chain(const Catalog& catalog, const RegistryOptions& options, std::shared_ptr<const UnitSource> given) {
  return TierChain(catalog, options, chain_parts(), std::move(given));
}

CompilerVersions compilers_for(DiskCache& cache) { return compiler_versions(cache, load_compilers); }

CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                        unsigned code_arch) {
  return unit_cache_key(catalog, unit, arch, compilers_for(cache), code_arch);
}

CacheKey linked_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch, DiskCache& cache,
                          std::string_view linked_source, unsigned code_arch) {
  return linked_cache_key(catalog, unit, arch, compilers_for(cache), linked_source, code_arch);
}

}  // namespace kiln::detail
