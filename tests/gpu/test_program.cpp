// Programs given at run time on a real GPU: a plain kernel, a template by its name expression and one
// that includes CUB, launched and checked; from the JIT, then from disk in a new process, then from the
// remote cache on a second "machine"; a recorded run replayed for another architecture; and a kernel
// that outlives its program.
#include <doctest/doctest.h>

#include <kiln/cache.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/precompile.hpp>
#include <kiln/program.hpp>
#include <kiln/record.hpp>
#include <kiln/remote.hpp>

#include "device_buffer.hpp"
#include "run_self.hpp"
#include "remote_test_util.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace {

kiln::ProgramSource programs_source() {
  kiln::ProgramSource s;
  s.label = "tests/gpu_program";
  s.source = R"(
#include <cub/block/block_reduce.cuh>
#include "ops/twice.cuh"
extern "C" __global__ void fill(float* y, float v, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = v;
}
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = twice(a) * x[i] + y[i];
}
template <int Threads>
__global__ void block_sum(const int* in, int* out) {
  using Reduce = cub::BlockReduce<int, Threads>;
  __shared__ typename Reduce::TempStorage storage;
  const int sum = Reduce(storage).Sum(in[blockIdx.x * Threads + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";
  s.headers = {{"ops/twice.cuh", "template <typename T> __device__ T twice(T v) { return v + v; }\n"}};
  s.options = {"-std=c++17"};
  s.name_expressions = {"fill", "axpy<float>", "block_sum<128>"};
  return s;
}

// Every kernel of the program launched and its output checked.
bool program_works(kiln::Program& program) {
  // The device's primary context current, as the CUDA runtime would make it, for the allocations.
  kiln::check(kiln::driver().cuCtxSetCurrent(program.registry().context()), "cuCtxSetCurrent");
  constexpr int n = 1000;
  kiln::test::DeviceBuffer<float> y(n);
  kiln::launch(program.get("fill"), {(n + 127) / 128}, {128}, 0, nullptr, y.ptr(), 1.5f, n);
  std::vector<float> xs(n);
  std::iota(xs.begin(), xs.end(), 0.0f);
  kiln::test::DeviceBuffer<float> x(xs);
  kiln::launch(program.get("axpy<float>"), {(n + 127) / 128}, {128}, 0, nullptr, 3.0f, x.ptr(), y.ptr(), n);
  const std::vector<float> got = y.to_host();
  bool ok = true;
  for (int i = 0; i < n; ++i) ok = ok && got[i] == 6.0f * xs[i] + 1.5f;
  std::vector<int> ones(4 * 128, 1);
  kiln::test::DeviceBuffer<int> in(ones);
  kiln::test::DeviceBuffer<int> sums(4);
  kiln::launch(program.get("block_sum<128>"), {4}, {128}, 0, nullptr, in.ptr(), sums.ptr());
  for (int s : sums.to_host()) ok = ok && s == 128;
  return ok;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char name[] = "/tmp/kiln-gpu-program-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace

// Entry point of the child process: `test_gpu --program-child DIR` (main.cpp).
int program_child_main(const char* dir) {
  setenv("KILN_CACHE_DIR", dir, 1);
  setenv("KILN_REMOTE_CACHE", "", 1);
  auto program = kiln::program(programs_source());
  const bool ok = program_works(*program);
  const kiln::Kernel k = program->get("block_sum<128>");
  std::printf("program-child: %s source=%s %.3f ms\n", ok ? "ok" : "wrong result",
              std::string(kiln::to_string(k.provenance.source)).c_str(), k.provenance.load_ms);
  return ok && k.provenance.source == kiln::Tier::disk ? 0 : 1;
}

TEST_CASE("programs: compiled by the JIT, launched and checked; then from disk in a new process") {
  TempDir dir;
  {
    kiln::DiskCache cache(kiln::test::config_at(dir.path));
    kiln::Program program(programs_source(), 0, {.cache = &cache, .use_remote = false});
    CHECK(program.plan("fill").source == kiln::Tier::jit);
    const kiln::Kernel first = program.get("axpy<float>");
    CHECK(first.provenance.source == kiln::Tier::jit);
    CHECK(std::string(first.lowered_name).starts_with("_Z"));
    CHECK(program.get("axpy<float>").provenance.tier == kiln::Tier::memory);
    CHECK(program_works(program));
    CHECK(program.registry().stats().jit_compiles == 1);  // one unit, all its kernels
    CHECK_THROWS_AS(program.get("axpy<double>"), kiln::Error);
  }
  CHECK(kiln::test::run_self("--program-child", dir.path.string()) == 0);
}

TEST_CASE("programs: the README's lines, launched and checked") {
  int n = 1000;
  CUdevice device = 0;
  CUcontext context = nullptr;
  kiln::check(kiln::driver().cuDeviceGet(&device, 0), "cuDeviceGet");
  kiln::check(kiln::driver().cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  kiln::check(kiln::driver().cuCtxSetCurrent(context), "cuCtxSetCurrent");
  kiln::test::DeviceBuffer<float> buffer(std::vector<float>(n, 1.5f));
  CUdeviceptr x = buffer.ptr();
kiln::ProgramSource src;
src.source = "template <typename T> __global__ void scale(T* x, T a, int n) {\n"
             "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n";
src.name_expressions = {"scale<float>"};
src.label = "filters";
auto program = kiln::program(src);                   // the same text again: the same program, no hashing
kiln::Kernel k = program->get("scale<float>");       // JIT once, then disk (any process), then memory
kiln::launch(k, {unsigned(n + 255) / 256}, {256}, 0, nullptr, x, 2.0f, n);
  kiln::check(kiln::driver().cuCtxSynchronize(), "cuCtxSynchronize");
  for (float v : buffer.to_host()) CHECK(v == 3.0f);
  kiln::driver().cuDevicePrimaryCtxRelease(device);
}

TEST_CASE("programs: one machine compiles, the next takes it from the remote cache") {
  if (kiln::test::redis_server_path().empty()) {
    MESSAGE("skipped: redis-server is not installed (scripts/setup.sh installs it; or set KILN_TEST_REDIS_SERVER)");
    return;
  }
  kiln::test::RedisServer server;
  kiln::test::TempDir a, b;
  kiln::DiskCache disk_a(kiln::test::config_at(a.path())), disk_b(kiln::test::config_at(b.path()));
  kiln::RemoteCache remote_a(kiln::test::remote_config(server.url())), remote_b(kiln::test::remote_config(server.url()));
  kiln::Program first(programs_source(), 0, {.cache = &disk_a, .remote = &remote_a});
  CHECK(first.get("fill").provenance.source == kiln::Tier::jit);
  CHECK(remote_a.stats().stores == 1);
  kiln::Program second(programs_source(), 0, {.cache = &disk_b, .remote = &remote_b});
  CHECK(second.get("fill").provenance.source == kiln::Tier::remote);
  CHECK(program_works(second));
  CHECK(second.registry().stats().jit_compiles == 0);
}

TEST_CASE("programs: a recorded run is replayed for another architecture without a device of it") {
  TempDir dir;
  const std::string record_path = (dir.path / "demand.record").string();
  kiln::record_demand(record_path);
  kiln::DiskCache cache(kiln::test::config_at(dir.path / "cache"));
  kiln::Program program(programs_source(), 0, {.cache = &cache, .use_remote = false});
  CHECK(program_works(program));
  const kiln::DemandRecord record = kiln::read_record(record_path);
  REQUIRE(record.programs.size() == 1);
  const unsigned other = program.registry().device().arch == 80 ? 86 : 80;
  kiln::test::set_setting("KILN_CACHE_DIR", (dir.path / "replayed").c_str());
  const auto results = kiln::precompile_record(record, other, {});
  REQUIRE(results.size() == 1);
  CHECK_MESSAGE(results[0].ok, results[0].error.message);  // compiled, or found in a default cache that had it
}

TEST_CASE("programs: a kernel kept after its program was dropped and forgotten still launches") {
  TempDir dir;
  kiln::DiskCache cache(kiln::test::config_at(dir.path));
  const kiln::RegistryOptions options{.cache = &cache, .use_remote = false};
  const kiln::test::ScopedEnv cap("KILN_PROGRAM_CACHE", "1");
  kiln::ProgramSource kept_source;
  kept_source.label = "tests/kept_kernel";
  kept_source.source = "extern \"C\" __global__ void kept_fill(float* y, float v, int n) {\n"
                       "  const int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = v; }\n";
  kept_source.name_expressions = {"kept_fill"};
  kiln::Kernel kept;
  std::weak_ptr<kiln::Program> dropped;
  {
    const std::shared_ptr<kiln::Program> program = kiln::program(kept_source, 0, options);
    kiln::check(kiln::driver().cuCtxSetCurrent(program->registry().context()), "cuCtxSetCurrent");
    kept = program->get("kept_fill");
    dropped = program;
  }
  const std::uint64_t live = kiln::library_stats().live;
  // Another program, and KILN_PROGRAM_CACHE 1: the kept kernel's program is forgotten, and nobody holds it.
  kiln::ProgramSource other = kept_source;
  other.source += "// another program\n";
  (void)kiln::program(other, 0, options);
  REQUIRE(dropped.expired());
  CHECK(kiln::library_stats().live == live);  // its module still loaded
  CHECK(std::string(kept.name) == "kept_fill");
  {
    constexpr int n = 1000;
    kiln::test::DeviceBuffer<float> y(n);
    kiln::launch(kept, {(n + 127) / 128}, {128}, 0, nullptr, y.ptr(), 2.5f, n);
    for (float v : y.to_host()) CHECK(v == 2.5f);
  }
  kept = {};  // the last holder: the module goes with it
  CHECK(kiln::library_stats().live == live - 1);
}
