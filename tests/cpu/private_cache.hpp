// A disk cache of the test's own and registry options that use it and no remote cache: nothing a test's
// program compiles (or is refused) reaches the user's cache or the fleet's.
#pragma once

#include <kiln/cache.hpp>
#include <kiln/registry.hpp>

#include "cache_test_util.hpp"

#include <memory>

namespace kiln::test {

struct PrivateCache {
  TempDir tmp;
  std::unique_ptr<DiskCache> cache = std::make_unique<DiskCache>(config_at(tmp.path() / "kiln"));
  RegistryOptions options = [this] {
    RegistryOptions o;
    o.cache = cache.get();
    o.use_remote = false;
    return o;
  }();
};

}  // namespace kiln::test
