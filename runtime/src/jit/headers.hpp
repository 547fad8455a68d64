// The headers a unit's JIT compile hands NVRTC in memory, from the catalog's compressed bundle.
#pragma once

#include "jit/compiler/compile.hpp"  // Header

#include <kiln/catalog.hpp>

#include <vector>

namespace kiln::detail {

// The headers `unit` includes (UnitEntry::first_header, header_count), named as its #includes name them
// (codegen/header_bundle.py). The catalog's bundle is decompressed once and kept while it is among the
// KILN_PROGRAM_CACHE most recently used (base/kept_programs.hpp). Throws
// Error(catalog) when the catalog has no bundle but the unit needs one, or the bundle is damaged.
std::vector<Header> unit_headers(const Catalog& catalog, const UnitEntry& unit);

}  // namespace kiln::detail
