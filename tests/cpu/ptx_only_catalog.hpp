// A catalog of one unit, "ptx_unit" with kernel "k1", that embeds only compute_80 PTX: on a newer device
// the PTX tier would assemble it, unless an entry on disk serves it first.
#pragma once

#include "catalog_builder.hpp"

#include <kiln/catalog.hpp>

namespace kiln::test {

inline const Catalog& ptx_only_catalog() {
  struct Built {
    CatalogBuilder builder;
    Catalog catalog;
    Built() {
      builder.kernel("k1", builder.unit("ptx_unit", {compute(80)}));
      catalog = builder.build("ptx_only");
    }
  };
  static const Built built;
  return built.catalog;
}

}  // namespace kiln::test
