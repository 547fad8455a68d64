// What a query answers itself: its unit's cache key; and what it asks its chain.
#include "chain/tier.hpp"
#include "chain/tier_chain.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

DiskCache& UnitQuery::cache() const { return chain.cache(); }
const UnitSource* UnitQuery::given() const noexcept { return chain.given(); }
CompilerVersions UnitQuery::compilers() const { return chain.compilers(); }
std::vector<std::unique_ptr<UnitStore>> UnitQuery::stores() const { return chain.stores(); }

CacheKey UnitQuery::key(unsigned code_arch) const {
  const CompilerVersions versions = compilers();
  if (link == nullptr) return unit_cache_key(catalog, unit(), arch, versions, code_arch);
  // The unit's embedded LTO-IR, when there is one for the device or an older architecture, is what the
  // link builds on: its architecture is the code's (jit/build.cpp).
  const BinaryEntry* lto_ir = select_lto_ir(catalog, unit(), arch);
  return linked_cache_key(catalog, unit(), arch, versions, link_identity(*link), lto_ir != nullptr ? lto_ir->arch : arch);
}

}  // namespace kiln::detail
