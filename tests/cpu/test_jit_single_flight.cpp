// 64 threads asking for one cold unit through the JIT tier and the disk
// cache's lock compile it once, with the real NVRTC (no GPU needed), and all get the same cubin.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/kiln.hpp>

#include "cache_test_util.hpp"
#include "examples_catalog.hpp"
#include "registry/query.hpp"  // unit_cache_key with a DiskCache
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

// The concurrency suite: also run under ThreadSanitizer (scripts/sanitize.sh).
TEST_SUITE_BEGIN("concurrency");

TEST_CASE("64 threads missing one cold unit compile it once and share the entry") {
  kiln::test::TempDir tmp;
  kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
  REQUIRE(cache.usable());
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const std::uint32_t unit = catalog.find("block_sum_f32")->unit;
  const kiln::CacheKey key = kiln::detail::unit_cache_key(catalog, catalog.units[unit], 90, cache);
  const auto request = kiln::detail::make_request(catalog, unit, 90);

  constexpr int threads = 64;
  std::atomic<int> compiles{0};
  std::latch start(threads);
  std::vector<std::string> cubins(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      cubins[t] = cache.get_or_build(key, [&] {
                            compiles.fetch_add(1);
                            return kiln::detail::jit_compile_entry(request);
                          }).cubin;
    });
  for (auto& t : pool) t.join();
  CHECK(compiles.load() == 1);
  CHECK_FALSE(cubins[0].empty());
  for (const auto& c : cubins) CHECK(c == cubins[0]);
  CHECK(cache.stats().entries == 1);
}

TEST_SUITE_END();
