// The disk tier on a real GPU: entries in a cache directory are loaded,
// launched and checked, in this process and in a new one; a corrupt entry never reaches the driver.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/kiln.hpp>

#include "device_buffer.hpp"
#include "run_self.hpp"
#include "example_checks.hpp"
#include "examples_catalog.hpp"
#include "fill_cache.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char name[] = "/tmp/kiln-gpu-cache-XXXXXX";
    path = mkdtemp(name);  // created 0700, as the cache requires
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

kiln::CacheConfig config_for(const std::filesystem::path& dir) {
  kiln::CacheConfig config;
  config.dir = dir;
  return config;
}

}  // namespace

// Entry point of the child process: `test_gpu --disk-child DIR` (see main.cpp).
int disk_child_main(const char* dir) {
  setenv("KILN_CACHE_DIR", dir, 1);  // the default cache, configured from the environment as a user's would be
  kiln::Registry registry(kiln::examples::catalog(), 0, {.allow_ptx = false, .use_embedded = false});
  const bool ok = kiln::test::block_sum_works(registry);
  const kiln::Kernel k = registry.get("block_sum_f32");
  std::printf("disk-child: %s tier=%s source=%s key=%s\n", ok ? "ok" : "wrong result",
              std::string(kiln::to_string(k.provenance.tier)).c_str(),
              std::string(kiln::to_string(k.provenance.source)).c_str(), std::string(k.provenance.cache_key).c_str());
  return ok && k.provenance.source == kiln::Tier::disk ? 0 : 1;
}

TEST_CASE("disk tier: entries stored by one registry are loaded, launched and checked by another") {
  TempDir dir;
  kiln::DiskCache cache(config_for(dir.path));
  REQUIRE(cache.usable());
  kiln::Registry writer(kiln::examples::catalog());
  REQUIRE(kiln::test::fill_cache_from_embedded(writer, cache) == 3);

  kiln::Registry reader(kiln::examples::catalog(), 0, {.allow_ptx = false, .use_embedded = false, .cache = &cache, .use_jit = false});
  // plan() probes the directory and loads nothing.
  CHECK(reader.plan("vector_add").source == kiln::Tier::disk);
  CHECK(reader.stats().unit_loads == 0);

  const kiln::Kernel k = reader.get("vector_add");
  CHECK(k.provenance.tier == kiln::Tier::disk);
  CHECK(k.provenance.source == kiln::Tier::disk);
  CHECK(k.provenance.arch == reader.device().arch);
  CHECK(k.provenance.cache_key == writer.cache_key("vector_add").hex);
  CHECK(reader.get("vector_add").provenance.tier == kiln::Tier::memory);
  CHECK(reader.stats().disk_loads == 1);
  CHECK(kiln::test::block_sum_works(reader));
  CHECK(cache.stats().hits == 2);
}

TEST_CASE("disk tier: an entry written by one process is loaded and launched by the next") {
  TempDir dir;
  {
    kiln::DiskCache cache(config_for(dir.path));
    kiln::Registry writer(kiln::examples::catalog());
    REQUIRE(kiln::test::fill_cache_from_embedded(writer, cache) == 3);
  }
  CHECK(kiln::test::run_self("--disk-child", dir.path.string()) == 0);
}

TEST_CASE("disk tier: a corrupt entry is detected before the driver, deleted, and reported as a miss") {
  TempDir dir;
  kiln::DiskCache cache(config_for(dir.path));
  kiln::Registry writer(kiln::examples::catalog());
  REQUIRE(kiln::test::fill_cache_from_embedded(writer, cache) == 3);
  // Flip one byte near the end of scale's entry: inside the zstd frame.
  const auto key = writer.cache_key("scale_f32");
  std::filesystem::path file;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path))
    if (e.path().filename().string().starts_with(key.hex)) file = e.path();
  REQUIRE(!file.empty());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-8, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-8, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  kiln::Registry reader(kiln::examples::catalog(), 0, {.allow_ptx = false, .use_embedded = false, .cache = &cache, .use_jit = false});
  try {
    reader.get("scale_f32");
    FAIL("expected kiln::Error");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::no_binary);
    CHECK(std::string(e.what()).find(key.hex) != std::string::npos);
  }
  CHECK(cache.stats().corrupt == 1);
  CHECK_FALSE(std::filesystem::exists(file));
  CHECK(reader.stats().unit_loads == 0);
  CHECK(reader.get("vector_add").provenance.source == kiln::Tier::disk);  // the other entries still serve
}
