// What a query answers itself: its unit's cache key.
#include "chain/tier.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

CacheKey UnitQuery::key(unsigned code_arch) const {
  const CompilerVersions versions = compilers();
  if (link == nullptr) return unit_cache_key(catalog, unit(), arch, versions, code_arch);
  // The unit's embedded LTO-IR, when there is one for the device or an older architecture, is what the
  // link builds on: its architecture is the code's (jit/build.cpp).
  const BinaryEntry* lto_ir = select_lto_ir(catalog, unit(), arch);
  return linked_cache_key(catalog, unit(), arch, versions, link_identity(*link), lto_ir != nullptr ? lto_ir->arch : arch);
}

}  // namespace kiln::detail
