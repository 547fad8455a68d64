// One CUlibrary per binary image in the process, shared by the registries of every device that selects
// that image: a library is context-independent (each device resolves its own functions from it), so load
// time and memory grow with the number of distinct images, not with the number of devices.
#pragma once

#include <kiln/registry.hpp>

#include <cuda.h>

#include <string>

namespace kiln::detail {

// The library of the image called `identity` (what makes two images the same: an embedded image's
// catalog, unit and architecture, or a cache entry's key), loaded from `image` by the first registry that
// asks, counted, and kept until every registry that acquired it has released it. Throws Error(driver)
// from cuLibraryLoadData, naming `what`.
CUlibrary acquire_library(const std::string& identity, const std::string& image, const std::string& what);
void release_library(CUlibrary library) noexcept;

LibraryStats library_stats_now() noexcept;

}  // namespace kiln::detail
