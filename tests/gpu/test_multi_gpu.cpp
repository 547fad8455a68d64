// Several GPUs in one process (skipped, exit 77, with fewer than two): every example kernel on each device
// at once, one thread per device, outputs checked; one library load per image however many devices use
// it; a kernel refused on another device's stream; and, through KILN_DEVICE_ARCH, a server of mixed
// architectures: device 1 selects sm_80's binary while device 0 keeps its own. The primitives' cases are
// multi_gpu_prim.cpp's, in the same program when the primitives are built.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/kiln.hpp>

#include "cache_test_util.hpp"  // set_setting
#include "device_buffer.hpp"
#include "examples_catalog.hpp"
#include "multi_gpu.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::test::Current;
using kiln::test::device_count;

// Every kernel of the examples registry launched on the registry's device, its output checked.
bool examples_work(kiln::Registry& registry) {
  const Current current(registry);
  constexpr int n = 1 << 16;
  std::vector<float> a(n), b(n);
  std::iota(a.begin(), a.end(), 0.0f);
  std::iota(b.begin(), b.end(), 1.0f);
  kiln::test::DeviceBuffer<float> da(a), db(b), dc(n);
  kiln::launch(registry.get("vector_add"), {n / 256}, {256}, 0, nullptr, da.ptr(), db.ptr(), dc.ptr(), n);
  bool ok = true;
  const auto c = dc.to_host();
  for (int i = 0; i < n; ++i) ok = ok && c[i] == a[i] + b[i];
  kiln::launch(registry.get("scale_f32"), {64}, {256}, 0, nullptr, da.ptr(), dc.ptr(), 2.0f, n);
  const auto s = dc.to_host();
  for (int i = 0; i < n; ++i) ok = ok && s[i] == 2.0f * a[i];
  std::vector<double> ad(a.begin(), a.end());
  kiln::test::DeviceBuffer<double> dad(ad), dsd(n);
  kiln::launch(registry.get("scale_f64"), {64}, {256}, 0, nullptr, dad.ptr(), dsd.ptr(), 3.0, n);
  const auto sd = dsd.to_host();
  for (int i = 0; i < n; ++i) ok = ok && sd[i] == 3.0 * ad[i];
  kiln::test::DeviceBuffer<float> ones(std::vector<float>(1 << 20, 1.0f)), partial(32);
  kiln::launch(registry.get("block_sum_f32"), {32}, {256}, 0, nullptr, ones.ptr(), partial.ptr(), 1 << 20);
  const auto sums = partial.to_host();
  ok = ok && std::accumulate(sums.begin(), sums.end(), 0.0) == (1 << 20);
  return ok;
}

}  // namespace

TEST_CASE("every example kernel on every device at once, one thread each; one library per image") {
  const int n = device_count();
  const kiln::LibraryStats before = kiln::library_stats();
  std::vector<std::unique_ptr<kiln::Registry>> registries;
  for (int d = 0; d < n; ++d) registries.push_back(std::make_unique<kiln::Registry>(kiln::examples::catalog(), d));
  std::vector<int> ok(n, 0);
  std::vector<std::thread> threads;
  for (int d = 0; d < n; ++d) threads.emplace_back([&, d] { ok[d] = examples_work(*registries[d]); });
  for (auto& t : threads) t.join();
  for (int d = 0; d < n; ++d) CHECK_MESSAGE(ok[d], "device " << d);
  // The devices are of one kind: each unit's image is loaded once, and shared by the other registries (a
  // unit the JIT compiled in parts has an image per part).
  const kiln::LibraryStats after = kiln::library_stats();
  const std::uint64_t units = kiln::examples::catalog().units.size();
  const std::uint64_t loads = after.loads - before.loads;
  CHECK(loads >= units);
  CHECK(loads <= kiln::examples::catalog().kernels.size());
  CHECK(after.shared - before.shared == loads * (n - 1));
  for (int d = 0; d < n; ++d) CHECK(registries[d]->stats().unit_loads == units);
  MESSAGE(n << " devices: " << after.loads - before.loads << " library loads, " << after.shared - before.shared << " shared");
}

TEST_CASE("a kernel made for one device is refused on another device's stream") {
  kiln::Registry zero(kiln::examples::catalog(), 0), one(kiln::examples::catalog(), 1);
  const kiln::Kernel k = zero.get("vector_add");
  CUstream stream = nullptr;
  {
    const Current current(one);
    kiln::check(kiln::driver().cuStreamCreate(&stream, 0), "cuStreamCreate");
    kiln::test::DeviceBuffer<float> buffer(256);
    try {
      kiln::launch(k, {1}, {256}, 0, stream, buffer.ptr(), buffer.ptr(), buffer.ptr(), 256);
      FAIL("a kernel of device 0 launched on device 1's stream");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::invalid_argument);
      CHECK(std::string(e.what()).find("device 0") != std::string::npos);
    }
    // With device 1's context current and no stream: the same.
    CHECK_THROWS_AS(kiln::launch(k, {1}, {256}, 0, nullptr, buffer.ptr(), buffer.ptr(), buffer.ptr(), 256), kiln::Error);
    // Its own device's kernel on the same stream is fine.
    kiln::launch(one.get("vector_add"), {1}, {256}, 0, stream, buffer.ptr(), buffer.ptr(), buffer.ptr(), 256);
    kiln::check(kiln::driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
    kiln::driver().cuStreamDestroy(stream);
  }
}

TEST_CASE("mixed architectures: each device selects the binary of its own architecture") {
  // One machine of one kind stands in for a server of mixed GPUs: device 1 is told it is an sm_80. Its
  // registry then selects sm_80's binary, as on a real sm_80, while device 0 keeps its own. An sm_90 GPU
  // cannot run an sm_80 cubin, so the load that follows is refused by the driver: a clear kiln::Error
  // naming the unit and the binary, and device 0 is unaffected.
  kiln::test::set_setting("KILN_DEVICE_ARCH", "1:80");
  kiln::Registry zero(kiln::examples::catalog(), 0), one(kiln::examples::catalog(), 1);
  CHECK(one.device().arch == 80);
  CHECK(zero.device().arch != 80);
  const kiln::LoadPlan plan = one.plan("vector_add");
  CHECK(plan.available);
  CHECK(plan.arch == 80);
  CHECK(zero.plan("vector_add").arch == zero.device().arch);
  if (zero.device().arch / 10 != 8) {
    try {
      (void)one.get("vector_add");
      FAIL("an sm_80 binary loaded on a GPU of another major architecture");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::driver);
      CHECK(std::string(e.what()).find("vector_add") != std::string::npos);
    }
  }
  CHECK(examples_work(zero));
  CHECK(zero.get("vector_add").provenance.arch == zero.device().arch);
  kiln::test::set_setting("KILN_DEVICE_ARCH", nullptr);
}

int main(int argc, char** argv) {
#ifdef KILN_TEST_PRIMITIVES
  // A case's child process (run_self.hpp), on a machine the parent already found two GPUs on.
  if (argc == 3 && std::string(argv[1]) == "--mixed-arch-primitives") {
    try {
      return kiln::test::mixed_arch_primitives();
    } catch (const kiln::Error& e) {
      std::printf("mixed architectures, primitives: %s\n", e.what());
      return 1;
    }
  }
#endif
  try {
    if (device_count() < 2) {
      std::printf("multi_gpu suite skipped: fewer than two GPUs\n");
      return 77;
    }
  } catch (const kiln::Error& e) {
    std::printf("multi_gpu suite skipped: %s\n", e.what());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
