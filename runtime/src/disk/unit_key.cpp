// A unit's disk-cache key from its catalog entry: registry, unit, build-time digest, arch, compilers.
#include "disk/unit_key.hpp"

#include <cuda.h>

namespace kiln::detail {

CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch) {
  const std::string toolkit = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  CacheKeyFields fields;
  fields.registry = std::string(catalog.name);
  fields.unit = std::string(catalog.str(unit.name));
  fields.source_digest = std::string(catalog.str(unit.digest));
  fields.arch = arch;
  fields.nvrtc = toolkit;
  fields.nvjitlink = toolkit;
  fields.cccl = std::string(catalog.cccl_version);
  return CacheKey::from(fields);
}

}  // namespace kiln::detail
