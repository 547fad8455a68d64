// Each example kernel from the embedded tier: launched on real data, checked
// against the CPU, with its provenance; then the in-memory tier, lazy loading and concurrent first calls.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/select.hpp>  // select_binary, binary_label

#include "cache_test_util.hpp"  // TempDir
#include "device_buffer.hpp"
#include "example_checks.hpp"
#include "examples_catalog.hpp"

#include <atomic>
#include <cmath>
#include <cstring>
#include <latch>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

using kiln::test::DeviceBuffer;

namespace {

// Runs with the registry's device context current, as a user's launch code would.
struct ContextScope {
  explicit ContextScope(kiln::Registry& r) { kiln::check(kiln::driver().cuCtxPushCurrent(r.context()), "push"); }
  ~ContextScope() {
    CUcontext ignored;
    kiln::driver().cuCtxPopCurrent(&ignored);
  }
};

// A disk cache of its own, empty, in a directory removed at scope exit.
struct EmptyCache {
  kiln::test::TempDir dir;
  kiln::DiskCache cache{config_of(dir)};
  static kiln::CacheConfig config_of(const kiln::test::TempDir& d) {
    kiln::CacheConfig config;
    config.dir = d.path();
    return config;
  }
};

template <typename T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-100.0, 100.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// The first get() in a registry: embedded, with an exact arch match, in a build for this GPU;
// assembled from embedded PTX by the PTX tier or compiled by the JIT tier (or read back from disk) in a
// build without it.
void check_embedded_provenance(kiln::Registry& registry, const kiln::Kernel& k) {
  if (kiln::test::arch_embedded(registry.device().arch)) {
    CHECK(k.provenance.tier == kiln::Tier::embedded);
    CHECK(k.provenance.source == kiln::Tier::embedded);
  } else {
    CHECK((k.provenance.source == kiln::test::cold_tier(registry.device().arch) || k.provenance.source == kiln::Tier::disk));
    CHECK(k.provenance.tier == k.provenance.source);
  }
  const unsigned arch = registry.device().arch;
  CHECK(k.provenance.arch == (kiln::test::arch_embedded(arch) ? arch : kiln::test::cold_code_arch(arch)));
  // Assembled from embedded PTX: by this registry's PTX tier, or read back from disk where it left it.
  CHECK(k.provenance.ptx == (!kiln::test::arch_embedded(arch) && kiln::test::cold_tier(arch) == kiln::Tier::ptx));
  CHECK(k.provenance.load_ms > 0.0);
  CHECK(k.function != nullptr);
  CHECK(k.kernel != nullptr);
}

}  // namespace

TEST_CASE("vector_add (extern \"C\"): embedded, launched, checked; then served from memory") {
  kiln::Registry registry(kiln::examples::catalog());
  const kiln::Kernel k = registry.get("vector_add");
  check_embedded_provenance(registry, k);
  CHECK(k.lowered_name == "vector_add");

  ContextScope scope(registry);
  int n = 100'003;
  auto a = random_values<float>(n, 1), b = random_values<float>(n, 2);
  DeviceBuffer<float> da(a), db(b), dc(n);
  kiln::launch(k, {static_cast<unsigned>((n + 255) / 256)}, {256}, 0, nullptr, da.ptr(), db.ptr(), dc.ptr(), n);
  auto c = dc.to_host();
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += c[i] != a[i] + b[i];
  CHECK(wrong == 0);

  const kiln::Kernel again = registry.get("vector_add");
  CHECK(again.provenance.tier == kiln::Tier::memory);
  CHECK(again.provenance.source == k.provenance.source);
  CHECK(again.function == k.function);
  CHECK(again.provenance.load_ms == k.provenance.load_ms);
  CHECK(registry.stats().unit_loads == 1);
}

TEST_CASE_TEMPLATE("scale<T> (two instantiations of one template)", T, float, double) {
  kiln::Registry registry(kiln::examples::catalog());
  const char* name = std::is_same_v<T, float> ? "scale_f32" : "scale_f64";
  const kiln::Kernel k = registry.get(name);
  check_embedded_provenance(registry, k);
  CHECK(k.lowered_name.starts_with("_ZN13kiln_examples5scaleI"));

  ContextScope scope(registry);
  int n = 1 << 20;
  auto x = random_values<T>(n, 3);
  DeviceBuffer<T> dx(x), dy(n);
  T alpha = T(2.5);
  kiln::launch(k, {120}, {256}, 0, nullptr, dx.ptr(), dy.ptr(), alpha, n);
  auto y = dy.to_host();
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += std::fabs(y[i] - alpha * x[i]) > std::fabs(alpha * x[i]) * T(1e-6);
  CHECK(wrong == 0);
}

TEST_CASE("block_sum_f32 (CUB BlockReduce, from a template family) sums correctly") {
  kiln::Registry registry(kiln::examples::catalog());
  const kiln::Kernel k = registry.get("block_sum_f32");
  check_embedded_provenance(registry, k);

  ContextScope scope(registry);
  const int n = 1'000'003, blocks = 64;
  std::vector<float> in(n);
  std::mt19937 rng(4);
  for (auto& v : in) v = static_cast<float>(rng() % 7) - 3.0f;  // small integers: the float sum is exact
  DeviceBuffer<float> din(in), dpartial(blocks);
  kiln::launch(k, {blocks}, {256}, 0, nullptr, din.ptr(), dpartial.ptr(), n);
  auto partial = dpartial.to_host();
  double gpu = std::accumulate(partial.begin(), partial.end(), 0.0);
  double cpu = std::accumulate(in.begin(), in.end(), 0.0);
  CHECK(gpu == cpu);
}

TEST_CASE("a typed handle launches with values, on a thread with no current context") {
  // The common path with nothing else: a registry, a handle, a launch. The thread has no context of its
  // own; kiln::launch makes the registry's (the device's primary context) current, as the runtime would.
  kiln::Registry registry(kiln::examples::catalog());
  const int n = 4099;
  const auto x = random_values<float>(n, 5);
  std::vector<float> y;
  std::string failure;
  std::thread([&] {
    try {
      CUcontext current = nullptr;
      kiln::check(kiln::driver().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
      CHECK(current == nullptr);
      const auto scale = registry.get(kiln::examples::kernels::scale_f32);  // a TypedKernel
      const unsigned arch = registry.device().arch;
      CHECK(scale.provenance.arch == (kiln::test::arch_embedded(arch) ? arch : kiln::test::cold_code_arch(arch)));
      kiln::check(kiln::driver().cuCtxSetCurrent(nullptr), "cuCtxSetCurrent");  // get() leaves none current
      CUdeviceptr dx = 0, dy = 0;
      scale.launch({32}, {128}, 0, nullptr, dx, dy, 2.0f, 0);  // n = 0: nothing touched; the context is made current
      kiln::check(kiln::driver().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
      CHECK(current == registry.context());
      DeviceBuffer<float> bx(x), by(n);
      scale.launch({32}, {128}, 0, nullptr, bx.ptr(), by.ptr(), 2.0f, n);  // values: 2.0f and n are rvalues
      y = by.to_host();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }).join();
  REQUIRE_MESSAGE(failure.empty(), failure);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += y[i] != 2.0f * x[i];
  CHECK(wrong == 0);
}

TEST_CASE("loading is lazy: only the unit asked for is loaded") {
  kiln::Registry registry(kiln::examples::catalog());
  CHECK(registry.stats().unit_loads == 0);
  registry.get("scale_f32");
  CHECK(registry.stats().unit_loads == 1);
  CHECK(registry.stats().kernel_loads == 1);
  registry.get("scale_f64");  // same unit: its library is reused
  CHECK(registry.stats().unit_loads == 1);
  CHECK(registry.stats().kernel_loads == 2);
}

TEST_CASE("32 threads asking for one kernel at once load it once and get the same handle") {
  kiln::Registry registry(kiln::examples::catalog());
  registry.context();  // device set up first, so the race is on the kernel, not on cuInit
  constexpr int threads = 32;
  std::latch start(threads);
  std::vector<kiln::Kernel> got(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = registry.get("block_sum_f32");
    });
  for (auto& th : pool) th.join();
  CHECK(registry.stats().unit_loads == 1);
  CHECK(registry.stats().kernel_loads == 1);
  int loaded_here = 0;
  for (const auto& k : got) {
    CHECK(k.function == got[0].function);
    loaded_here += k.provenance.tier != kiln::Tier::memory;
  }
  CHECK(loaded_here == 1);  // exactly one caller did the load; the other 31 were served from memory
}

TEST_CASE("two kernels of one unit, raced by 32 threads: one library load, two kernel loads") {
  kiln::Registry registry(kiln::examples::catalog());
  registry.context();
  constexpr int threads = 32;
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      registry.get(t % 2 ? "scale_f32" : "scale_f64");
    });
  for (auto& th : pool) th.join();
  CHECK(registry.stats().unit_loads == 1);
  CHECK(registry.stats().kernel_loads == 2);
}

TEST_CASE("a device with no matching binary gets a no_binary error that lists what is embedded") {
  // The examples catalog cut down to the binaries of other major versions (and PTX, which is not
  // allowed): nothing left runs on this device without the driver compiling PTX.
  kiln::Registry probe(kiln::examples::catalog());
  const unsigned arch = probe.device().arch;
  const kiln::Catalog& full = kiln::examples::catalog();
  std::vector<kiln::BinaryEntry> binaries;
  std::vector<kiln::UnitEntry> units(full.units.begin(), full.units.end());
  for (auto& u : units) {
    const auto first = static_cast<std::uint32_t>(binaries.size());
    for (const auto& b : full.binaries_of(u))
      if (b.arch / 10 != arch / 10 || b.kind == kiln::BinaryKind::ptx) binaries.push_back(b);
    u.first_binary = first;
    u.binary_count = static_cast<std::uint32_t>(binaries.size()) - first;
  }
  kiln::Catalog cut = full;
  cut.units = units;
  cut.binaries = binaries;
  // The JIT tier would compile what is missing, and the default disk cache may hold it already (a build
  // without this GPU's arch fills it): an empty cache of its own, and no JIT.
  EmptyCache empty;
  kiln::Registry registry(cut, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = false});
  const kiln::UnitEntry& unit = cut.units[cut.find("vector_add")->unit];
  try {
    registry.get("vector_add");
    FAIL("expected kiln::Error");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::no_binary);
    const std::string what = e.what();
    CHECK(what.find("vector_add") != std::string::npos);
    CHECK(what.find("sm_" + std::to_string(arch)) != std::string::npos);
    for (const auto& b : cut.binaries_of(unit)) CHECK(what.find(kiln::binary_label(b)) != std::string::npos);
    CHECK(what.find("-Darchs") != std::string::npos);
  }
  CHECK(registry.stats().unit_loads == 0);
  CHECK_FALSE(registry.plan("vector_add").available);
}

namespace {

// The examples' vector_add unit alone, over a copy of the fatbins to damage. A registry of one unit made
// while the context is up unpacks nothing ahead, so its get() fetches the cubin itself: packed, for the
// driver to unpack (docs/DESIGN.md, "Embedded fatbins").
struct VectorAddAlone {
  std::vector<unsigned char> blobs;
  std::vector<kiln::KernelEntry> kernels;
  kiln::Catalog catalog;
  const kiln::BinaryEntry* binary = nullptr;

  explicit VectorAddAlone(unsigned arch) : catalog(kiln::examples::catalog()) {
    const kiln::Catalog& full = kiln::examples::catalog();
    const std::uint32_t u = full.find("vector_add")->unit;
    blobs.assign(full.blobs, full.blobs + full.blobs_size);
    for (kiln::KernelEntry k : full.kernels) {
      if (k.unit != u) continue;
      k.unit = 0;
      kernels.push_back(k);
    }
    catalog.blobs = blobs.data();
    catalog.units = full.units.subspan(u, 1);
    catalog.kernels = kernels;
    binary = kiln::select_binary(full, full.units[u], arch, false);
  }
  // The zstd frame's first block made of the reserved type: a payload neither libzstd nor the driver reads.
  void damage_payload() {
    std::uint32_t header_size = 0;
    std::memcpy(&header_size, blobs.data() + binary->offset + 4, sizeof header_size);
    unsigned char* frame = blobs.data() + binary->offset + header_size;
    // The frame header (RFC 8878): magic, descriptor, window byte unless single-segment, dictionary id and
    // content size of the sizes the descriptor gives; then the first block's 3-byte header, type in bits 1-2.
    REQUIRE(frame[0] == 0x28);
    const unsigned descriptor = frame[4];
    const bool single = (descriptor >> 5) & 1;
    const std::size_t dict_bytes[] = {0, 1, 2, 4}, size_bytes[] = {single ? 1u : 0u, 2, 4, 8};
    const std::size_t at = 5 + (single ? 0 : 1) + dict_bytes[descriptor & 3] + size_bytes[descriptor >> 6];
    REQUIRE(at + 3 <= binary->stored_size);
    frame[at] |= 0x06;
  }
};

// vector_add run on 1000 items and checked.
void check_vector_add(kiln::Registry& registry, const kiln::Kernel& k) {
  ContextScope scope(registry);
  const int n = 1000;
  auto a = random_values<float>(n, 3), c = random_values<float>(n, 4);
  DeviceBuffer<float> da(a), dc(c), dout(n);
  kiln::launch(k, {4}, {256}, 0, nullptr, da.ptr(), dc.ptr(), dout.ptr(), n);
  const auto out = dout.to_host();
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out[i] != a[i] + c[i];
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("a unit nothing unpacked ahead goes to the driver packed and runs; a payload it refuses is unpacked, found damaged, and the next tier serves") {
  kiln::Registry up(kiln::examples::catalog());
  const unsigned arch = up.device().arch;  // the primary context retained, as in a process already using CUDA
  VectorAddAlone alone(arch);
  if (alone.binary == nullptr || alone.binary->compression != kiln::Compression::zstd) {
    MESSAGE("skipped: this build embeds no compressed cubin for sm_" << arch);
    return;
  }
  EmptyCache empty;
  SUBCASE("packed: loaded, and runs") {
    kiln::Registry registry(alone.catalog, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = false});
    const kiln::Kernel k = registry.get("vector_add");
    CHECK(k.provenance.source == kiln::Tier::embedded);
    CHECK(k.provenance.arch == alone.binary->arch);
    check_vector_add(registry, k);
  }
  SUBCASE("a damaged payload, with the JIT: compiled from source, and runs") {
    alone.damage_payload();
    kiln::Registry registry(alone.catalog, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = true});
    const kiln::Kernel k = registry.get("vector_add");
    CHECK(k.provenance.source == kiln::Tier::jit);
    check_vector_add(registry, k);
  }
  SUBCASE("a damaged payload, without: no_binary, saying the image is damaged") {
    alone.damage_payload();
    kiln::Registry registry(alone.catalog, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = false});
    try {
      registry.get("vector_add");
      FAIL("expected kiln::Error");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::no_binary);
      CHECK(std::string(e.what()).find("is damaged") != std::string::npos);
      CHECK(std::string(e.what()).find("zstd") != std::string::npos);
    }
    CHECK(registry.stats().unit_loads == 0);
  }
}

TEST_CASE("an embedded image whose fatbin entry disagrees with the table is a miss: never loaded, the next tier serves") {
  kiln::Registry probe(kiln::examples::catalog());
  const unsigned arch = probe.device().arch;
  const kiln::Catalog& full = kiln::examples::catalog();
  const kiln::BinaryEntry* b = kiln::select_binary(full, full.units[full.find("vector_add")->unit], arch, false);
  if (b == nullptr) {
    MESSAGE("skipped: this build embeds no cubin for sm_" << arch);
    return;
  }
  // The selected image's entry names another architecture (its arch field, at +28 of the entry).
  std::vector<unsigned char> blobs(full.blobs, full.blobs + full.blobs_size);
  const std::uint32_t other = b->arch + 1;
  std::memcpy(blobs.data() + b->offset + 28, &other, sizeof other);
  kiln::Catalog damaged = full;
  damaged.blobs = blobs.data();
  EmptyCache empty;
  SUBCASE("with the JIT: the unit is compiled from source, and runs") {
    kiln::Registry registry(damaged, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = true});
    const kiln::Kernel k = registry.get("vector_add");
    CHECK(k.provenance.source == kiln::Tier::jit);
    CHECK(k.provenance.arch == arch);
    check_vector_add(registry, k);
  }
  SUBCASE("without: no_binary, saying which image is damaged") {
    kiln::Registry registry(damaged, 0, {.allow_ptx = false, .cache = &empty.cache, .use_jit = false});
    try {
      registry.get("vector_add");
      FAIL("expected kiln::Error");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::no_binary);
      CHECK(std::string(e.what()).find("embedded sm_" + std::to_string(b->arch) + " image") != std::string::npos);
      CHECK(std::string(e.what()).find("is damaged") != std::string::npos);
    }
    CHECK(registry.stats().unit_loads == 0);
  }
}
