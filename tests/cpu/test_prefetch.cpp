// Prefetch: the images it unpacks ahead are exactly what the embedded tier fetches, each handed over
// once; it keeps to its budget, unpacks nothing with the embedded tier off, stops when destroyed, and
// opens the disk cache ahead (counting nothing) only when a unit will need it; the disk entries it reads
// ahead are what the disk tier fetches, counted as hits only when handed over; a unit on neither tier
// has it ask the JIT tier to start a worker.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>
#include <kiln/select.hpp>

#include "disk/cache_internal.hpp"  // runtime/src
#include "disk/disk_tier.hpp"
#include "embedded/embedded_tier.hpp"
#include "registry/query.hpp"  // make_chain, unit_cache_key with a DiskCache
#include "registry/prefetch.hpp"
#include "base/fatbin.hpp"  // read_fatbins, unpack
#include "fake_cubin.hpp"
#include "cache_test_util.hpp"
#include "examples_catalog.hpp"

#include <cstddef>
#include <vector>

namespace {

const kiln::Catalog& catalog() { return kiln::examples::catalog(); }

// The architecture of the catalog's first cubin: one the build embeds.
unsigned embedded_arch() {
  for (const auto& b : catalog().binaries)
    if (b.kind == kiln::BinaryKind::cubin) return b.arch;
  FAIL("the examples embed no cubin");
  return 0;
}

const kiln::KernelEntry& kernel_of(std::size_t unit) {
  for (const auto& k : catalog().kernels)
    if (k.unit == unit) return k;
  FAIL("a unit without kernels");
  return catalog().kernels.front();
}

}  // namespace

TEST_CASE("every unit's image unpacked ahead is what the embedded tier fetches, handed over once") {
  const unsigned arch = embedded_arch();
  const kiln::RegistryOptions options;
  const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
  kiln::detail::Prefetch prefetch(chain, arch);
  prefetch.wait();
  std::size_t expected = 0;
  for (const auto& unit : catalog().units) expected += kiln::select_binary(catalog(), unit, arch, false) != nullptr;
  REQUIRE(expected > 0);
  CHECK(prefetch.unpacked() == expected);
  for (std::size_t u = 0; u < catalog().units.size(); ++u) {
    auto ready = prefetch.take(u);
    REQUIRE(ready.has_value());
    // A get()'s own fetch hands the driver the cubin packed; the thread's is unpacked, the same cubin.
    kiln::detail::UnitQuery unpacked = chain.query(kernel_of(u), arch);
    unpacked.unpack = true;
    auto fetched = kiln::detail::embedded_tier().fetch(unpacked);
    REQUIRE(fetched.ok());
    CHECK_FALSE(ready->packed);
    CHECK_FALSE(fetched->packed);
    CHECK(ready->owned == fetched->owned);
    auto packed = kiln::detail::embedded_tier().fetch(chain.query(kernel_of(u), arch));
    REQUIRE(packed.ok());
    CHECK(packed->packed);
    const auto read = kiln::detail::read_fatbins(
        {reinterpret_cast<const unsigned char*>(packed->owned.data()), packed->owned.size()});
    REQUIRE_MESSAGE(read.ok(), read.error());
    REQUIRE(read->size() == 1);
    CHECK(kiln::detail::unpack(read->front()).value() == ready->owned);
    CHECK(ready->arch == fetched->arch);
    CHECK(ready->label == fetched->label);
    CHECK(ready->source == kiln::Tier::embedded);
    CHECK(ready->tier == kiln::Tier::embedded);
    CHECK_FALSE(prefetch.take(u).has_value());  // once
  }
  CHECK_FALSE(prefetch.take(catalog().units.size()).has_value());
}

TEST_CASE("the prefetch keeps to its budget, and unpacks nothing for an arch without cubins") {
  const unsigned arch = embedded_arch();
  const kiln::RegistryOptions options;
  const auto* first = kiln::select_binary(catalog(), catalog().units.front(), arch, false);
  REQUIRE(first != nullptr);
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
    kiln::detail::Prefetch prefetch(chain, arch, first->size - 1);
    prefetch.wait();
    CHECK(prefetch.unpacked() == 0);
  }
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
    kiln::detail::Prefetch prefetch(chain, arch, first->size);
    prefetch.wait();
    CHECK(prefetch.unpacked() == 1);
    CHECK(prefetch.take(0).has_value());
  }
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
    kiln::detail::Prefetch prefetch(chain, 10);  // sm_10: nothing runs there
    prefetch.wait();
    CHECK(prefetch.unpacked() == 0);
  }
}

TEST_CASE("with the embedded tier off the prefetch starts nothing, and one destroyed at once stops") {
  const unsigned arch = embedded_arch();
  kiln::RegistryOptions off;
  off.use_embedded = false;
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), off);
    kiln::detail::Prefetch prefetch(chain, arch);
    prefetch.wait();
    CHECK(prefetch.unpacked() == 0);
    CHECK_FALSE(prefetch.take(0).has_value());
  }
  // Destroyed while (perhaps) still running: it stops between units and joins; what it unpacked is freed.
  for (int i = 0; i < 20; ++i) {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), kiln::RegistryOptions{});
    kiln::detail::Prefetch prefetch(chain, arch);
  }
}

TEST_CASE("the disk cache is opened and a key made ahead only when some unit has no embedded cubin; nothing is counted") {
  const unsigned arch = embedded_arch();
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "kiln"));
  kiln::RegistryOptions no_embedded;
  no_embedded.use_embedded = false;
  no_embedded.cache = &cache;
  no_embedded.use_jit = false;  // the units miss the disk too: no JIT worker started from a test
  no_embedded.allow_ptx = false;
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), no_embedded);
    kiln::detail::Prefetch prefetch(chain, arch);
    prefetch.wait();
    CHECK(prefetch.warmed_disk());
    CHECK(prefetch.unpacked() == 0);
  }
  kiln::RegistryOptions embedded;
  embedded.cache = &cache;
  embedded.use_jit = false;
  embedded.allow_ptx = false;
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), embedded);
    kiln::detail::Prefetch prefetch(chain, arch);  // every unit embedded for this arch
    prefetch.wait();
    CHECK_FALSE(prefetch.warmed_disk());
  }
  {
    const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), embedded);
    kiln::detail::Prefetch prefetch(chain, 10);  // none: the disk tier will be asked
    prefetch.wait();
    CHECK(prefetch.warmed_disk());
  }
  const auto stats = cache.stats();
  CHECK(stats.hits == 0);
  CHECK(stats.misses == 0);
  CHECK(stats.stores == 0);
}

namespace {

// A valid entry of unit `u` for `arch`, stored in `cache` under the unit's key.
void store_unit_entry(kiln::DiskCache& cache, std::size_t u, unsigned arch) {
  kiln::CacheEntry e;
  e.arch = arch;
  std::vector<std::string> lowered;
  for (const auto& k : catalog().kernels) {
    if (k.unit != u) continue;
    e.kernels.push_back({std::string(catalog().str(k.name)), std::string(catalog().str(k.lowered))});
    lowered.push_back(std::string(catalog().str(k.lowered)));
  }
  e.compiler = "nvrtc 13.0 + nvjitlink 13.0";
  e.cubin = kiln::test::fake_cubin(arch, lowered, "code of unit " + std::to_string(u));
  const auto key = kiln::detail::unit_cache_key(catalog(), catalog().units[u], arch, cache);
  REQUIRE(kiln::detail::store_entry(cache, key, e).ok());
}

}  // namespace

TEST_CASE("disk entries read ahead are what the disk tier fetches, counted as hits only when handed over") {
  constexpr unsigned arch = 10;  // nothing embedded runs there: every unit goes to the disk tier
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "kiln"));
  for (std::size_t u = 0; u < catalog().units.size(); ++u) store_unit_entry(cache, u, arch);
  const auto stored = cache.stats();
  kiln::RegistryOptions options;
  options.cache = &cache;
  const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
  kiln::detail::Prefetch prefetch(chain, arch);
  prefetch.wait();
  CHECK(prefetch.read_from_disk() == catalog().units.size());
  CHECK_FALSE(prefetch.jit_started());  // every unit is on disk: no compile will be needed
  CHECK(cache.stats().hits == stored.hits);  // nothing counted yet
  CHECK(cache.stats().misses == stored.misses);
  for (std::size_t u = 0; u < catalog().units.size(); ++u) {
    const auto before = cache.stats().hits;
    auto ready = prefetch.take(u);
    REQUIRE(ready.has_value());
    CHECK(cache.stats().hits == before);  // taking it counts nothing; the chain counts it as it serves
    const kiln::detail::UnitQuery q = chain.query(kernel_of(u), arch);
    chain.served(q, *ready);
    CHECK(cache.stats().hits == before + 1);  // (the fetch below counts its own)
    auto fetched = kiln::detail::disk_tier().fetch(q);
    REQUIRE(fetched.ok());
    CHECK(ready->owned == fetched->owned);
    CHECK(ready->label == fetched->label);
    CHECK(ready->cache_key == fetched->cache_key);
    CHECK(ready->source == kiln::Tier::disk);
    CHECK(ready->tier == kiln::Tier::disk);
    const auto after = cache.stats().hits;
    CHECK_FALSE(prefetch.take(u).has_value());
    CHECK(cache.stats().hits == after);
  }
  CHECK(cache.stats().misses == stored.misses);
}

TEST_CASE("a unit on neither the embedded tier nor the disk has the prefetch start the JIT's worker; a miss is not counted") {
  constexpr unsigned arch = 10;
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "kiln"));
  store_unit_entry(cache, 0, arch);  // the first unit is on disk, the others are not
  REQUIRE(catalog().units.size() > 1);
  const auto stored = cache.stats();
  kiln::RegistryOptions options;
  options.cache = &cache;
  options.use_jit = false;  // no worker started from this test (start_jit_ahead looks at these): that the prefetch asked is what counts here
  options.allow_ptx = false;
  const kiln::detail::TierChain chain = kiln::detail::make_chain(catalog(), options);
  kiln::detail::Prefetch prefetch(chain, arch);
  prefetch.wait();
  CHECK(prefetch.read_from_disk() == 1);
  CHECK(prefetch.jit_started());
  CHECK(cache.stats().misses == stored.misses);
  CHECK(cache.stats().hits == stored.hits);
  CHECK(prefetch.take(0).has_value());
  CHECK_FALSE(prefetch.take(1).has_value());
}
