// What a user of kiln's registries includes: the registry, kernels and their launch, and errors.
//
// The rest is included by whoever needs it: <kiln/catalog.hpp> (a generated catalog's tables),
// <kiln/cache.hpp> and <kiln/cache_pack.hpp> (the disk cache and packs), <kiln/remote.hpp> (the remote
// cache), <kiln/precompile.hpp> (filling the cache for an architecture), <kiln/cli.hpp> (a project's
// command-line tool), <kiln/driver.hpp> (the CUDA driver, loaded with dlopen).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/error.hpp>
#include <kiln/registry.hpp>
