// The JIT tier takes entries from the disk cache with the same check as the disk tier: an entry under the
// unit's key that lacks one of its kernels (a foreign entry) is not handed to the driver, but deleted and
// rebuilt. Real NVRTC (no GPU needed), the tiers' own steps, a real cache directory.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>

#include "cache_test_util.hpp"
#include "base/cubin_elf.hpp"
#include "disk/disk_tier.hpp"
#include "examples_catalog.hpp"
#include "jit/jit_tier.hpp"
#include "registry/query.hpp"  // make_chain, unit_cache_key with a DiskCache

TEST_CASE("a foreign entry planted under a unit's key between the disk miss and the JIT is deleted and rebuilt") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const kiln::KernelEntry& kernel = *catalog.find("vector_add");
  const std::string lowered(catalog.str(kernel.lowered));
  kiln::RegistryOptions options;
  options.cache = &cache;
  const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog, options);
  const kiln::detail::UnitQuery q = chain.query(kernel, 80);

  CHECK_FALSE(kiln::detail::disk_tier().fetch(q).ok());  // the disk tier misses: nothing there yet
  // Now, before the JIT tier asks the cache again, an entry that decodes and checks out on its own (its
  // cubin defines the kernels it lists) but is not this unit's appears under the unit's key.
  kiln::CacheEntry foreign;
  foreign.arch = 80;
  foreign.kernels = {{"other", "other"}};
  foreign.compiler = "elsewhere";
  foreign.cubin = kiln::test::fake_cubin(80, {"other"});
  const kiln::CacheKey key = kiln::detail::unit_cache_key(catalog, catalog.units[kernel.unit], 80, cache);
  REQUIRE(cache.store(key, foreign));

  const auto image = kiln::detail::jit_tier().fetch(q);
  REQUIRE(image.ok());
  CHECK(kiln::detail::read_cubin(image->owned).defines(lowered));  // the unit's own kernel, not 'other'
  CHECK(image->source == kiln::Tier::jit);                          // compiled, not taken from disk
  const auto stored = cache.load(key);
  REQUIRE(stored.has_value());
  CHECK(stored->kernels.at(0).name == "vector_add");  // the foreign entry is gone, the rebuilt one stored
  CHECK(cache.stats().corrupt == 1);                  // counted, as the disk tier counts a bad entry
  CHECK(kiln::detail::disk_tier().fetch(q).ok());            // and the disk tier now serves it
}
