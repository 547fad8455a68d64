// Puts a catalog's cubins for this device into a disk cache, as the JIT tier
// would publish them, so the disk tier can be tested (and timed): the embedded cubin where the build has
// this GPU's arch, otherwise one the JIT tier compiles and publishes to that cache.
#pragma once

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>
#include <kiln/select.hpp>  // select_binary

#include <string>

namespace kiln::test {

// Stores one entry per unit, under the key the registry looks up for the device's architecture.
// Returns the number of entries stored.
inline int fill_cache_from_embedded(Registry& registry, DiskCache& cache) {
  const Catalog& catalog = registry.catalog();
  const unsigned arch = registry.device().arch;
  int stored = 0;
  for (std::uint32_t u = 0; u < catalog.units.size(); ++u) {
    const UnitEntry& unit = catalog.units[u];
    CacheEntry entry;
    entry.arch = arch;
    entry.options = std::string(catalog.str(unit.options));
    entry.compiler = "nvcc (kiln's embedded cubin, copied by the tests)";
    const KernelEntry* first = nullptr;
    for (const KernelEntry& k : catalog.kernels) {
      if (k.unit != u) continue;
      first = first ? first : &k;
      entry.kernels.push_back({std::string(catalog.str(k.name)), std::string(catalog.str(k.lowered))});
    }
    if (!first) continue;
    const BinaryEntry* binary = select_binary(catalog, unit, arch, false);
    if (!binary || binary->arch != arch) {
      // A build without this GPU's arch (scripts/gpu-check.sh runs one): the JIT tier compiles the unit
      // and publishes the entry to `cache`.
      Registry jit(catalog, registry.device().ordinal, {.allow_ptx = false, .use_embedded = false, .cache = &cache, .use_jit = true});
      const Kernel k = jit.get(catalog.str(first->name));
      stored += k.provenance.source == Tier::jit || k.provenance.source == Tier::disk;
      continue;
    }
    entry.cubin = catalog.image(*binary);
    stored += cache.store(registry.cache_key(catalog.str(first->name)), entry);
  }
  return stored;
}

}  // namespace kiln::test
