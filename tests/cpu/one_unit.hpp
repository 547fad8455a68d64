// A catalog of one unit whose kernel is sample_entry(1)'s first, so that an entry built for
// unit_cache_key(catalog, unit, 90) serves it: the remote tier's tests of the chain's step.
#pragma once

#include "cache_test_util.hpp"
#include "catalog_builder.hpp"
#include "registry/query.hpp"  // unit_cache_key with a DiskCache

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

namespace kiln::test {

struct OneUnit {
  CatalogBuilder builder;
  Catalog catalog;
  OneUnit() {
    const std::uint32_t u = builder.unit("fleet_unit", {});
    builder.kernel("k1", u);
    catalog = builder.build("fleet");
  }
  CacheKey key(unsigned arch = 90) const { return detail::unit_cache_key(catalog, catalog.units[0], arch, default_cache()); }
};

}  // namespace kiln::test
