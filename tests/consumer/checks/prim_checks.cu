// On a GPU: kiln's open primitives on geo's kiln.* rows (geo.toml), run by kiln::prim's header-only plans
// from this nvcc-compiled file against CPU references: a float exclusive sum, a max-by-field reduction of
// the project's own geo::Tagged, an int running max; scans of a counting and a constant iterator, reduces
// through a transform iterator and a transform of a zip; a descending merge sort by geo's comparator; a
// select by geo's predicate; and lazy inputs of the other families: a segmented reduce through a transform
// iterator, a select from a counting iterator by a predicate with state, a transform of a zip, a
// unique-by-key and an argsort whose values come from a counting iterator.
// Sizes 0, 1, each plan's tile edges, 1,000,003 and 2^24, every output poisoned before each run (the sort
// works in place: its n = 0 run must leave the buffer as it was); from the embedded tier, then the JIT
// tier. Exits 77 (skipped) where kiln::driver() finds no CUDA driver or GPU.
#include <kiln/kiln.hpp>
#include <kiln/prim/merge_sort_plan.cuh>
#include <kiln/prim/reduce_plan.cuh>
#include <kiln/prim/scan_plan.cuh>
#include <kiln/prim/segmented_reduce_plan.cuh>
#include <kiln/prim/select_plan.cuh>
#include <kiln/prim/transform_plan.cuh>
#include <kiln/prim/unique_by_key_plan.cuh>

#include <kiln_prim/iterators.cuh>

// CUB's own device-wide headers beside the plans, as a project's file may have them: each plan includes
// the CUB headers it needs so that neither order defines anything twice (CCCL 3.0.1's
// dispatch_unique_by_key.cuh has no include guard).
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_select.cuh>

#include <geo/lazy.cuh>
#include <geo/tagged.cuh>

#include "check.hpp"
#include "gpu_main.hpp"
#include "geo_catalog.hpp"

#include <algorithm>
#include <iterator>
#include <cstdint>
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

// Exclusive scan of first, first + 1, …: no input in memory. Sums stay below 2^63 at 2^24 items.
void check_counting_scan(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::counting_iterator<long long>;
  kiln::prim::ExclusiveScan<long long, ::cuda::std::plus<>, In> plan(geo, "count_scan_i64");
  check_source(plan.kernel(), embedded);
  const long long first = -1000, init = 7;
  for (std::size_t n : sizes(plan.tile_items())) {
    Buffer<long long> d_out(n);
    d_out.fill_poison();
    plan(In{first}, d_out.get(), n, init);
    const std::vector<long long> got = d_out.download();
    if (n == 0) {
      CHECK(poisoned(got[0]));
      continue;
    }
    long long want = init;
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) {
      same = got[i] == want;
      want += first + (long long)i;
    }
    CHECK(same);
  }
}

// Inclusive scan of one constant: c, 2c, 3c, …
void check_constant_scan(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::constant_iterator<int>;
  kiln::prim::InclusiveScan<int, ::cuda::std::plus<>, In> plan(geo, "ramp_i32");
  check_source(plan.kernel(), embedded);
  for (std::size_t n : sizes(plan.tile_items())) {
    Buffer<int> d_out(n);
    d_out.fill_poison();
    plan(In{3}, d_out.get(), n);
    const std::vector<int> got = d_out.download();
    if (n == 0) {
      CHECK(poisoned(got[0]));
      continue;
    }
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) same = got[i] == 3 * int(i + 1);
    CHECK(same);
  }
}

// Integer-valued floats below 1000: squares and products, and their sums up to 2^24 items, are exact in
// double in any order of additions.
std::vector<float> small_integers(std::size_t n, std::mt19937& random) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(random() % 1000u);
  return v;
}

void check_sum_squares(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::transform_iterator<double, geo::Square, const float*>;
  kiln::prim::Reduce<double, ::cuda::std::plus<>, In> plan(geo, "sum_squares_f64");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(23);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> x = small_integers(n, random);
    double want = 1.0;  // init
    for (float v : x) want += double(v) * double(v);
    Buffer<float> d_x(n);
    Buffer<double> d_out(1);
    d_x.upload(x);
    d_out.fill_poison();
    plan(In{d_x.get(), {}}, d_out.get(), n, 1.0);
    CHECK(d_out.download()[0] == want);
  }
}

void check_dot(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::transform_iterator<double, geo::Product, kiln_prim::zip_iterator<const float*, const float*>>;
  kiln::prim::Reduce<double, ::cuda::std::plus<>, In> plan(geo, "dot_f64");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(24);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> x = small_integers(n, random), y = small_integers(n, random);
    double want = 0.0;
    for (std::size_t i = 0; i < n; ++i) want += double(x[i]) * double(y[i]);
    Buffer<float> d_x(n), d_y(n);
    Buffer<double> d_out(1);
    d_x.upload(x);
    d_y.upload(y);
    d_out.fill_poison();
    plan(In{{d_x.get(), d_y.get()}, {}}, d_out.get(), n, 0.0);
    CHECK(d_out.download()[0] == want);
  }
}

// Many equal keys (1000 values), values their input positions: stability shows in the values' order.
void check_sort_descending(kiln::Registry& geo, bool embedded) {
  kiln::prim::MergeSort<float, int, geo::Descending> plan(geo, "sort_desc_f32");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(25);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> keys = small_integers(n, random);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] > keys[b]; });
    Buffer<float> d_keys(n);
    Buffer<int> d_values(n);
    std::vector<int> values(n);
    std::iota(values.begin(), values.end(), 0);
    if (n == 0) {
      d_keys.fill_poison();
      d_values.fill_poison();
    }
    d_keys.upload(keys);
    d_values.upload(values);
    plan(d_keys.get(), d_values.get(), n);
    const std::vector<float> got_keys = d_keys.download();
    const std::vector<int> got_values = d_values.download();
    if (n == 0) {
      CHECK(poisoned(got_keys[0]) && poisoned(got_values[0]));
      continue;
    }
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) same = got_values[i] == order[i] && got_keys[i] == keys[order[i]];
    CHECK(same);
  }
}

// Half the values positive, in random places; the count and the kept values in order.
void check_select_positive(kiln::Registry& geo, bool embedded) {
  kiln::prim::SelectIf<double, geo::Positive> plan(geo, "positive_f64");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(26);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<double> in(n);
    for (auto& v : in) v = value(random);
    std::vector<double> want;
    std::copy_if(in.begin(), in.end(), std::back_inserter(want), [](double x) { return x > 0.0; });
    Buffer<double> d_in(n), d_out(n);
    Buffer<long long> d_count(1);
    d_in.upload(in);
    d_out.fill_poison();
    d_count.fill_poison();
    plan(d_in.get(), d_out.get(), d_count.get(), n);
    const long long count = d_count.download()[0];
    const std::vector<double> got = d_out.download();
    CHECK(count == (long long)want.size());
    CHECK(std::equal(want.begin(), want.end(), got.begin()));
    if (want.size() < got.size()) CHECK(poisoned(got[want.size()]));  // nothing written past the count
  }
}

// Segments of 0 to 3,000 items (a tile's edges and empty ones among them) over n items, the last cut at n;
// n = 0 is one empty segment. Each segment's sum of squares plus init, exact in double (small integers).
void check_segment_squares(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::transform_iterator<double, geo::Square, const float*>;
  kiln::prim::SegmentedReduction<double, ::cuda::std::plus<>, In> plan(geo, "segment_squares_f64");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(27);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> x = small_integers(n, random);
    std::vector<std::int32_t> offsets{0};
    do {
      offsets.push_back(std::int32_t(std::min<std::size_t>(n, std::size_t(offsets.back()) + random() % 3001u)));
    } while (std::size_t(offsets.back()) < n);
    const std::size_t segments = offsets.size() - 1;
    std::vector<double> want(segments, 1.0);  // init
    for (std::size_t s = 0; s < segments; ++s) {
      for (std::int32_t i = offsets[s]; i < offsets[s + 1]; ++i) want[s] += double(x[i]) * double(x[i]);
    }
    Buffer<float> d_x(n);
    Buffer<std::int32_t> d_offsets(offsets.size());
    Buffer<double> d_out(segments);
    d_x.upload(x);
    d_offsets.upload(offsets);
    d_out.fill_poison();
    plan(In{d_x.get(), {}}, d_out.get(), segments, d_offsets.get(), 1.0);
    const std::vector<double> got = d_out.download();
    CHECK(std::equal(want.begin(), want.end(), got.begin()));
  }
}

// The multiples of 7 among -1000, -999, …: nothing is read from memory; the predicate's divisor is given at
// the call. The count, the kept values in order, nothing written past the count.
void check_multiples(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::counting_iterator<long long>;
  kiln::prim::SelectIf<long long, geo::MultipleOf, In> plan(geo, "multiples_i64");
  check_source(plan.kernel(), embedded);
  const long long first = -1000;
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<long long> want;
    for (long long x = first; x < first + (long long)n; ++x) {
      if (x % 7 == 0) want.push_back(x);
    }
    Buffer<long long> d_out(n), d_count(1);
    d_out.fill_poison();
    d_count.fill_poison();
    plan(In{first}, d_out.get(), d_count.get(), n, nullptr, geo::MultipleOf{7});
    const long long count = d_count.download()[0];
    const std::vector<long long> got = d_out.download();
    CHECK(count == (long long)want.size());
    CHECK(std::equal(want.begin(), want.end(), got.begin()));
    if (want.size() < got.size()) CHECK(poisoned(got[want.size()]));
  }
}

// x[i] · y[i] in double, read through a zip of two float arrays (CUB's prefetch algorithm: the input is not
// contiguous memory).
void check_products(kiln::Registry& geo, bool embedded) {
  using In = kiln_prim::zip_iterator<const float*, const float*>;
  kiln::prim::Transform<kiln_prim::pair<float, float>, double, geo::Product, In> plan(geo, "products_f64");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(28);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> x = small_integers(n, random), y = small_integers(n, random);
    Buffer<float> d_x(n), d_y(n);
    Buffer<double> d_out(n);
    d_x.upload(x);
    d_y.upload(y);
    d_out.fill_poison();
    plan(In{d_x.get(), d_y.get()}, d_out.get(), n);
    const std::vector<double> got = d_out.download();
    if (n == 0) {
      CHECK(poisoned(got[0]));
      continue;
    }
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) same = got[i] == double(x[i]) * double(y[i]);
    CHECK(same);
  }
}

// Keys 0 to 3 at random (runs of one to a few): each run's key and where it starts, the positions coming
// from a counting iterator; nothing written past the count.
void check_run_starts(kiln::Registry& geo, bool embedded) {
  using Positions = kiln_prim::counting_iterator<int>;
  kiln::prim::Unique<int, int, ::cuda::std::equal_to<>, void, Positions> plan(geo, "run_starts_i32");
  check_source(plan.kernel(), embedded);
  std::mt19937 random(29);
  for (std::size_t n : sizes(plan.tile_items())) {
    std::vector<int> keys(n);
    for (auto& k : keys) k = int(random() % 4u);
    std::vector<int> want_keys, want_starts;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 0 || keys[i] != keys[i - 1]) {
        want_keys.push_back(keys[i]);
        want_starts.push_back(int(i));
      }
    }
    Buffer<int> d_keys(n), d_keys_out(n), d_starts(n);
    Buffer<unsigned long long> d_count(1);
    d_keys.upload(keys);
    d_keys_out.fill_poison();
    d_starts.fill_poison();
    d_count.fill_poison();
    plan(d_keys.get(), Positions{0}, d_keys_out.get(), d_starts.get(), d_count.get(), n);
    const unsigned long long count = d_count.download()[0];
    const std::vector<int> got_keys = d_keys_out.download(), got_starts = d_starts.download();
    CHECK(count == want_keys.size());
    CHECK(std::equal(want_keys.begin(), want_keys.end(), got_keys.begin()));
    CHECK(std::equal(want_starts.begin(), want_starts.end(), got_starts.begin()));
    if (want_starts.size() < got_starts.size()) CHECK(poisoned(got_starts[want_starts.size()]));
  }
}

// The positions that sort the keys descending, stably (values from a counting iterator), the sorted keys
// beside them, and the input keys as they were: the sort copies.
void check_argsort(kiln::Registry& geo, bool embedded) {
  using Positions = kiln_prim::counting_iterator<int>;
  kiln::prim::MergeSort<float, int, geo::Descending, void, Positions> plan(geo, "argsort_desc_f32");
  static_assert(decltype(plan)::copy);
  check_source(plan.kernel(), embedded);
  std::mt19937 random(30);
  for (std::size_t n : sizes(plan.tile_items())) {
    const std::vector<float> keys = small_integers(n, random);
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] > keys[b]; });
    Buffer<float> d_keys(n), d_sorted(n);
    Buffer<int> d_order(n);
    d_keys.upload(keys);
    d_sorted.fill_poison();
    d_order.fill_poison();
    plan(d_keys.get(), Positions{0}, d_sorted.get(), d_order.get(), n);
    const std::vector<float> got_keys = d_sorted.download(), input = d_keys.download();
    const std::vector<int> got_order = d_order.download();
    if (n == 0) {
      CHECK(poisoned(got_keys[0]) && poisoned(got_order[0]));
      continue;
    }
    bool same = true;
    for (std::size_t i = 0; i < n && same; ++i) same = got_order[i] == order[i] && got_keys[i] == keys[order[i]];
    CHECK(same);
    CHECK(std::equal(keys.begin(), keys.end(), input.begin()));
  }
}

void check_tier(kiln::Registry& geo, bool embedded) {
  check_exclusive_sum(geo, embedded);
  check_max_by_a(geo, embedded);
  check_running_max(geo, embedded);
  check_counting_scan(geo, embedded);
  check_constant_scan(geo, embedded);
  check_sum_squares(geo, embedded);
  check_dot(geo, embedded);
  check_sort_descending(geo, embedded);
  check_select_positive(geo, embedded);
  check_segment_squares(geo, embedded);
  check_multiples(geo, embedded);
  check_products(geo, embedded);
  check_run_starts(geo, embedded);
  check_argsort(geo, embedded);
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
