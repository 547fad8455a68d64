// The JIT tier on a real GPU: with the embedded tier off, every kernel is compiled
// by NVRTC + nvJitLink (in worker processes), launched and checked, published to disk, and found there by the
// next registry and the next process; racing threads compile once; warm-up compiles in the background.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>

#include "cache_test_util.hpp"  // set_setting
#include "base/thread_start.hpp"
#include "device_buffer.hpp"
#include "example_checks.hpp"
#include "examples_catalog.hpp"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <latch>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

struct TempCache {
  std::filesystem::path path;
  kiln::DiskCache cache;
  TempCache() : path(make()), cache(config(path)) {}
  ~TempCache() { std::filesystem::remove_all(path); }
  static std::filesystem::path make() {
    char name[] = "/tmp/kiln-gpu-jit-XXXXXX";
    return mkdtemp(name);
  }
  static kiln::CacheConfig config(const std::filesystem::path& dir) {
    kiln::CacheConfig c;
    c.dir = dir;
    return c;
  }
};

kiln::RegistryOptions jit_only(kiln::DiskCache& cache) { return {.allow_ptx = false, .use_embedded = false, .cache = &cache}; }

bool vector_add_works(kiln::Registry& registry) {
  const kiln::Kernel k = registry.get("vector_add");
  kiln::check(kiln::driver().cuCtxPushCurrent(registry.context()), "push");
  const int n = 10'007;
  std::vector<float> a(n), b(n);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 1.0f);
  kiln::test::DeviceBuffer<float> da(a), db(b), dc(n);
  kiln::launch(k, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, nullptr, da.ptr(), db.ptr(), dc.ptr(), n);
  const auto c = dc.to_host();
  CUcontext ignored;
  kiln::driver().cuCtxPopCurrent(&ignored);
  for (int i = 0; i < n; ++i)
    if (c[i] != a[i] + b[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("JIT tier: every example kernel compiled for this GPU, launched, checked, then served from disk") {
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  const kiln::LoadPlan cold = registry.plan("block_sum_f32");
  CHECK(cold.tier == kiln::Tier::jit);
  CHECK(cold.source == kiln::Tier::jit);

  const kiln::Kernel k = registry.get("block_sum_f32");
  CHECK(k.provenance.source == kiln::Tier::jit);
  // Loaded: memory would serve it, and its binary is still the JIT's, as the next get()'s provenance says.
  const kiln::LoadPlan loaded = registry.plan("block_sum_f32");
  CHECK(loaded.tier == kiln::Tier::memory);
  CHECK(loaded.source == kiln::Tier::jit);
  CHECK(registry.get("block_sum_f32").provenance.tier == loaded.tier);
  CHECK(k.provenance.arch == registry.device().arch);
  CHECK(k.lowered_name == kiln::examples::catalog().str(kiln::examples::catalog().find("block_sum_f32")->lowered));
  MESSAGE("block_sum_f32 (CUB) cold JIT get: " << k.provenance.load_ms << " ms");
  CHECK(kiln::test::block_sum_works(registry));
  CHECK(vector_add_works(registry));
  for (const char* name : {"scale_f32", "scale_f64"}) CHECK(registry.get(name).provenance.source == kiln::Tier::jit);
  CHECK(registry.stats().jit_compiles == 3);  // three units, each compiled once
  CHECK(tmp.cache.stats().entries == 3);      // and published to the disk tier

  kiln::Registry next(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  CHECK(next.plan("block_sum_f32").source == kiln::Tier::disk);
  const kiln::Kernel again = next.get("block_sum_f32");
  CHECK(again.provenance.source == kiln::Tier::disk);
  CHECK(again.provenance.arch == registry.device().arch);
  CHECK(next.stats().jit_compiles == 0);
  CHECK(kiln::test::block_sum_works(next));
}

namespace {

// scale_f32 and scale_f64 (the unit `scale`) each scale a buffer by 3.
bool scale_works(kiln::Registry& registry) {
  const kiln::Kernel f32 = registry.get("scale_f32"), f64 = registry.get("scale_f64");
  kiln::check(kiln::driver().cuCtxPushCurrent(registry.context()), "push");
  const int n = 4'099;
  std::vector<float> a(n);
  std::iota(a.begin(), a.end(), 1.0f);
  std::vector<double> b(a.begin(), a.end());
  kiln::test::DeviceBuffer<float> da(a), ra(n);
  kiln::test::DeviceBuffer<double> db(b), rb(n);
  kiln::launch(f32, {16}, {256}, 0, nullptr, da.ptr(), ra.ptr(), 3.0f, n);
  kiln::launch(f64, {16}, {256}, 0, nullptr, db.ptr(), rb.ptr(), 3.0, n);
  const auto got_a = ra.to_host();
  const auto got_b = rb.to_host();
  CUcontext ignored;
  kiln::driver().cuCtxPopCurrent(&ignored);
  for (int i = 0; i < n; ++i)
    if (got_a[i] != 3.0f * a[i] || got_b[i] != 3.0 * b[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("JIT tier: a unit compiled in parts serves each kernel from its part's library, here and from disk") {
  // `scale`, alone and of two kernels the generator found splittable, is the critical path's unit: the
  // pool compiles it as two parts (unless KILN_JIT_SPLIT=0), one entry of two cubins.
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  CHECK(scale_works(registry));
  CHECK(registry.stats().jit_compiles == 1);
  const auto entry = tmp.cache.load(registry.cache_key("scale_f32"));
  REQUIRE(entry.has_value());
  const char* split = std::getenv("KILN_JIT_SPLIT");
  if (split == nullptr || std::string(split) != "0") CHECK(entry->parts.size() == 2);
  kiln::Registry next(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  CHECK(scale_works(next));
  CHECK(next.get("scale_f64").provenance.source == kiln::Tier::disk);
}

TEST_CASE("PTX tier: embedded PTX this GPU runs is assembled by kiln, launched, checked, published to disk") {
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, {.use_embedded = false, .cache = &tmp.cache, .use_jit = false});
  if (kiln::test::cold_tier(registry.device().arch) != kiln::Tier::ptx) {
    const kiln::LoadPlan plan = registry.plan("block_sum_f32");
    CHECK_FALSE(plan.available);  // no PTX this GPU runs, and the JIT is off: the driver's JIT is never tried
    MESSAGE("skipped: this build embeds no PTX for sm_" << registry.device().arch << " or below");
    return;
  }
  CHECK(registry.plan("block_sum_f32").source == kiln::Tier::ptx);
  const kiln::Kernel k = registry.get("block_sum_f32");
  CHECK(k.provenance.source == kiln::Tier::ptx);
  CHECK(k.provenance.ptx);
  // The PTX's architecture, not the device's: the code (CUB's policies in it) is that architecture's.
  CHECK(k.provenance.arch == kiln::test::newest_arch());
  CHECK(registry.plan("block_sum_f32").arch == kiln::test::newest_arch());
  MESSAGE("block_sum_f32 (CUB) from embedded PTX: " << k.provenance.load_ms << " ms");
  CHECK(kiln::test::block_sum_works(registry));
  CHECK(vector_add_works(registry));
  CHECK(tmp.cache.stats().entries == 2);

  kiln::Registry next(kiln::examples::catalog(), 0, {.use_embedded = false, .cache = &tmp.cache, .use_jit = false});
  // The plan names the tier get() then reads from: the disk entry under the PTX's key.
  const kiln::LoadPlan planned = next.plan("block_sum_f32");
  CHECK(planned.source == kiln::Tier::disk);
  CHECK(planned.arch == kiln::test::newest_arch());
  const kiln::Kernel again = next.get("block_sum_f32");
  CHECK(again.provenance.source == kiln::Tier::disk);
  CHECK(again.provenance.arch == kiln::test::newest_arch());  // the entry is keyed by the PTX's arch
  CHECK(kiln::test::block_sum_works(next));
}

TEST_CASE("JIT tier: a new process gets the JIT-built kernels from disk") {
  TempCache tmp;
  {
    kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
    REQUIRE(registry.get("block_sum_f32").provenance.source == kiln::Tier::jit);
  }
  char self[4096] = {};
  REQUIRE(readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  char* argv[] = {self, const_cast<char*>("--disk-child"), const_cast<char*>(tmp.path.c_str()), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, self, nullptr, nullptr, argv, environ) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the child checks the result and that the disk tier served it
}

TEST_CASE("JIT tier: 16 threads asking for one cold kernel compile it once") {
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  registry.context();
  constexpr int threads = 16;
  std::latch start(threads);
  std::vector<std::thread> pool;
  std::vector<CUfunction> got(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = registry.get("vector_add").function;
    });
  for (auto& th : pool) th.join();
  CHECK(registry.stats().jit_compiles == 1);
  for (auto f : got) CHECK(f == got[0]);
}

TEST_CASE("warm-up: embedded kernels are deferred; cold ones compile in the background; ensure_warm waits") {
  kiln::Registry embedded(kiln::examples::catalog());
  auto s = embedded.status();
  if (kiln::test::arch_embedded(embedded.device().arch)) {
    embedded.request_warmup({"vector_add", "scale_f32"});
    s = embedded.status();
    CHECK(s.deferred == 2);
    CHECK(s.submitted == 0);
    CHECK(s.pending == 0);
    CHECK(embedded.stats().unit_loads == 0);  // deferred: loaded on first get()
  }

  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  const std::vector<std::string> names{"vector_add", "scale_f32", "scale_f64", "block_sum_f32"};
  registry.request_warmup(names);
  registry.request_warmup(names);  // deduplicated
  const auto cold = registry.ensure_warm(names, std::chrono::minutes(5));
  CHECK(cold.empty());
  s = registry.status();
  CHECK(s.submitted == 4);
  CHECK(s.compiled == 4);
  CHECK(s.failed == 0);
  CHECK(s.pending == 0);
  CHECK(registry.stats().jit_compiles == 3);
  for (const auto& k : s.kernels) {
    CHECK(k.state == "loaded");
    CHECK(k.tier == kiln::Tier::jit);
    CHECK(k.ms > 0);
  }
  CHECK(vector_add_works(registry));
}

TEST_CASE("warm-up with no thread to be had: request_warmup returns, the kernel failed with the reason") {
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  (void)registry.device();
  kiln::detail::fail_thread_starts(1000);
  CHECK_NOTHROW(registry.request_warmup({"vector_add"}));
  kiln::detail::fail_thread_starts(0);
  const kiln::WarmupStatus s = registry.status();
  CHECK(s.failed == 1);
  REQUIRE(s.kernels.size() == 1);
  CHECK(s.kernels[0].state == "failed");
  CHECK(s.kernels[0].error.code == kiln::Errc::compile);
  CHECK_MESSAGE(s.kernels[0].error.message.find("no thread could be started") != std::string::npos, s.kernels[0].error.message);
  CHECK(vector_add_works(registry));  // threads to be had again: get() compiles it
}

TEST_CASE("warm-up: KILN_PRECOMPILE=0 turns background work off") {
  TempCache tmp;
  kiln::Registry registry(kiln::examples::catalog(), 0, jit_only(tmp.cache));
  kiln::test::set_setting("KILN_PRECOMPILE", "0");
  registry.request_warmup({"vector_add"});
  const auto cold = registry.ensure_warm({"vector_add"}, std::chrono::seconds(1));
  kiln::test::set_setting("KILN_PRECOMPILE", nullptr);
  CHECK(cold == std::vector<std::string>{"vector_add"});
  CHECK(registry.status().submitted == 0);
  CHECK(registry.stats().jit_compiles == 0);
}
