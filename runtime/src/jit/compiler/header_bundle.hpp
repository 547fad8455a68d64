// Unpacks a catalog's header bundle to disk, so NVRTC reads the headers nvcc read.
#pragma once

#include <kiln/catalog.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::detail {

// Unpacks the catalog's headers into <base>/headers/<bundle digest>/ unless that directory exists
// (built in a temporary directory beside it, then renamed, so a reader never sees half of it), and
// returns it. Throws kiln::Error(catalog) when the catalog has no bundle or it is damaged, and
// Error(cache) when the directory cannot be written.
std::filesystem::path unpack_headers(const Catalog& catalog, const std::filesystem::path& base);

// The -I directories of a unit, in its search order, under an unpacked bundle.
std::vector<std::string> include_dirs(const Catalog& catalog, const UnitEntry& unit,
                                      const std::filesystem::path& unpacked);

}  // namespace kiln::detail
