// On a GPU: kiln's open primitives on geo's kiln.* rows (geo.toml), run by kiln::prim's header-only plans
// from this nvcc-compiled file against CPU references: a float exclusive sum, a max-by-field reduction of
// the project's own geo::Tagged, an int running max. Sizes 0, 1, each plan's tile edges, 1,000,003 and
// 2^24, every output poisoned before each run; from the embedded tier, then the JIT tier. Exits 77
// (skipped) where kiln::driver() finds no CUDA driver or GPU.
#include <kiln/kiln.hpp>
#include <kiln/prim/reduce_plan.cuh>
#include <kiln/prim/scan_plan.cuh>

#include <geo/tagged.cuh>

#include "check.hpp"
#include "gpu_main.hpp"
#include "geo_catalog.hpp"

#include <algorithm>
#include <cstdio>
#include <cuda/functional>
#include <cuda/std/functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using consumer::check_source;

namespace {

constexpr unsigned char poison = 0xAB;

// n items of device memory (at least one, so that n = 0 still has an output to find untouched).
template <typename T>
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
    kiln::check(kiln::driver().cuMemAlloc(&ptr_, bytes()), "cuMemAlloc");
  }
  ~Buffer() { kiln::driver().cuMemFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void upload(const std::vector<T>& host) {
    kiln::check(kiln::driver().cuMemcpyHtoD(ptr_, host.data(), host.size() * sizeof(T)), "cuMemcpyHtoD");
  }
  void fill_poison() { kiln::check(kiln::driver().cuMemsetD8(ptr_, poison, bytes()), "cuMemsetD8"); }
  std::vector<T> download() const {
    std::vector<T> host(std::max<std::size_t>(n_, 1));
    kiln::check(kiln::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    kiln::check(kiln::driver().cuMemcpyDtoH(host.data(), ptr_, bytes()), "cuMemcpyDtoH");
    return host;
  }
  T* get() const { return reinterpret_cast<T*>(ptr_); }

 private:
  std::size_t bytes() const { return std::max<std::size_t>(n_, 1) * sizeof(T); }
  std::size_t n_;
  CUdeviceptr ptr_ = 0;
};

template <typename T>
bool poisoned(const T& value) {
  const auto* p = reinterpret_cast<const unsigned char*>(&value);
  return std::all_of(p, p + sizeof(T), [](unsigned char c) { return c == poison; });
}

std::vector<std::size_t> sizes(std::size_t tile) {
  return {0, 1, tile - 1, tile, tile + 1, 1'000'003, std::size_t{1} << 24};
}

// Integer-valued floats, 0 or 1: every prefix sum below 2^24 is exact in any order of additions.
void check_exclusive_sum(kiln::Registry& geo, bool embedded) {
  kiln::prim::ExclusiveScan<float, ::cuda::std::plus<>> plan(geo, "scan_sum_f32");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(20);
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<float> in(n);
    for (auto& v : in) v = float(random() & 1u);
    std::vector<float> want(n);
    std::exclusive_scan(in.begin(), in.end(), want.begin(), 0.0f);
    Buffer<float> d_in(n), d_out(n);
    d_in.upload(in);
    d_out.fill_poison();
    // Caller storage here; the other plans use storage they own.
    const std::size_t bytes = plan.temp_bytes(n);
    Buffer<unsigned char> temp(bytes);
    plan(d_in.get(), d_out.get(), n, 0.0f, kiln::prim::TempStorage{temp.get(), bytes});
    const std::vector<float> got = d_out.download();
    if (n == 0) CHECK(poisoned(got[0]));
    else CHECK(std::equal(want.begin(), want.end(), got.begin()));
  }
}

// Distinct values of a (a shuffled index, exact in float below 2^24): the maximum and its tag are unique.
void check_max_by_a(kiln::Registry& geo, bool embedded) {
  kiln::prim::Reduce<geo::Tagged, geo::MaxByA> plan(geo, "max_by_a_tagged");
  check_source(plan.kernel(), embedded);
  const geo::Tagged init{-std::numeric_limits<float>::infinity(), -1};
  std::mt19937 random(21);
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    std::vector<geo::Tagged> in(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = {float(order[i]), int(i)};
    const geo::Tagged want = std::accumulate(in.begin(), in.end(), init, geo::MaxByA{});
    Buffer<geo::Tagged> d_in(n), d_out(1);
    d_in.upload(in);
    d_out.fill_poison();
    plan(d_in.get(), d_out.get(), n, init);
    const geo::Tagged got = d_out.download()[0];
    CHECK(got.a == want.a && got.b == want.b);
  }
}

void check_running_max(kiln::Registry& geo, bool embedded) {
  kiln::prim::InclusiveScan<int, ::cuda::maximum<>> plan(geo, "running_max_i32");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(22);
  std::uniform_int_distribution<int> value(-1'000'000'000, 1'000'000'000);
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<int> in(n);
    for (auto& v : in) v = value(random);
    std::vector<int> want(n);
    std::inclusive_scan(in.begin(), in.end(), want.begin(), [](int a, int b) { return std::max(a, b); });
    Buffer<int> d_in(n), d_out(n);
    d_in.upload(in);
    d_out.fill_poison();
    plan(d_in.get(), d_out.get(), n);
    const std::vector<int> got = d_out.download();
    if (n == 0) CHECK(poisoned(got[0]));
    else CHECK(std::equal(want.begin(), want.end(), got.begin()));
  }
}

void check_tier(kiln::Registry& geo, bool embedded) {
  check_exclusive_sum(geo, embedded);
  check_max_by_a(geo, embedded);
  check_running_max(geo, embedded);
}

void run_checks() {
  kiln::Registry geo(consumer::geo::catalog());
  // The JIT tier for the same kernels (or the disk cache a first run filled): no embedded binary, no PTX.
  kiln::Registry geo_jit(consumer::geo::catalog(), 0, {.allow_ptx = false, .use_embedded = false});
  kiln::check(kiln::driver().cuCtxPushCurrent(geo.context()), "cuCtxPushCurrent");  // for cuMemAlloc
  check_tier(geo, true);
  check_tier(geo_jit, false);
  CUcontext popped;
  kiln::driver().cuCtxPopCurrent(&popped);
}

}  // namespace

int main() { return consumer::gpu_main("consumer primitive checks", run_checks); }
