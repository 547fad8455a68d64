// kiln's primitives on several GPUs in one process (the multi_gpu suite, test_multi_gpu.cpp's main): every
// family's one-shot call and a plan on each device at once, one thread per device, outputs checked against
// the CPU; one library per image; a one-shot call runs on its stream's device's registry; a plan refuses
// another device's stream; and, in a child process with KILN_DEVICE_ARCH=1:80, device 1's one-shot calls
// take the sm_80 binary while device 0 keeps its own.
#include <doctest/doctest.h>

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/kiln.hpp>
#include <kiln/prim.hpp>
#include <kiln/prim/operator.hpp>

#include "device_buffer.hpp"
#include "multi_gpu.hpp"
#include "run_self.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using kiln::test::DeviceBuffer;

namespace {

template <typename T>
T* at(DeviceBuffer<T>& buffer) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(buffer.ptr()));
}

std::vector<std::int32_t> random_ints(std::size_t n, unsigned seed, std::int32_t lo, std::int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A stream of the current context's device, synchronised and destroyed with the scope.
class Stream {
 public:
  Stream() { kiln::check(kiln::driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
  ~Stream() { kiln::driver().cuStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return stream_; }
  void sync() const { kiln::check(kiln::driver().cuStreamSynchronize(stream_), "cuStreamSynchronize"); }

 private:
  CUstream stream_ = nullptr;
};

// Every primitive family's one-shot call on a stream of `device`, with that device's registry's context
// current (as a program with one thread per GPU has it), plus a plan built without a registry and an
// operator given at run time. Returns what went wrong, one line per failure; empty when all is right.
std::string primitives_work(int device) {
  kiln::Registry& registry = kiln::prim::registry(device);
  const kiln::test::Current current(registry);
  const Stream stream;
  const CUstream s = stream.get();
  std::ostringstream wrong;
  const std::size_t n = 100003;
  const auto in = random_ints(n, 7 + device, -1000, 1000);
  DeviceBuffer<std::int32_t> d_in(in), d_out(n), d_values(n), d_values_out(n);

  {  // exclusive sum
    kiln::prim::exclusive_sum(at(d_in), at(d_out), n, s);
    stream.sync();
    std::vector<std::int32_t> want(n);
    std::exclusive_scan(in.begin(), in.end(), want.begin(), 0);
    if (d_out.to_host() != want) wrong << "exclusive_sum\n";
  }
  {  // reduce
    DeviceBuffer<std::int32_t> d_sum(1);
    kiln::prim::reduce_sum(at(d_in), at(d_sum), n, s);
    stream.sync();
    if (d_sum.to_host()[0] != std::accumulate(in.begin(), in.end(), 0)) wrong << "reduce_sum\n";
  }
  {  // segmented reduce: segments of 1, 10, 100, ... items
    std::vector<std::int32_t> offsets{0};
    for (std::size_t length = 1; offsets.back() + length <= n; length *= 10) offsets.push_back(offsets.back() + length);
    const std::size_t segments = offsets.size() - 1;
    DeviceBuffer<std::int32_t> d_offsets(offsets), d_sums(segments);
    kiln::prim::segmented_reduce<kiln::prim::ReduceOp::sum>(at(d_in), at(d_sums), segments, at(d_offsets), s);
    stream.sync();
    std::vector<std::int32_t> want(segments);
    for (std::size_t i = 0; i < segments; ++i)
      want[i] = std::accumulate(in.begin() + offsets[i], in.begin() + offsets[i + 1], 0);
    if (d_sums.to_host() != want) wrong << "segmented_reduce\n";
  }
  std::vector<std::int32_t> values(n);
  std::iota(values.begin(), values.end(), 0);
  {  // merge sort of pairs (stable)
    std::vector<std::uint64_t> keys(in.size());
    for (std::size_t i = 0; i < n; ++i) keys[i] = static_cast<std::uint64_t>(in[i] + 1000);
    DeviceBuffer<std::uint64_t> d_keys(keys);
    DeviceBuffer<std::int32_t> d_vals(values);
    kiln::prim::merge_sort_pairs(at(d_keys), at(d_vals), n, s);
    stream.sync();
    std::vector<std::int32_t> order = values;
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return keys[a] < keys[b]; });
    if (d_vals.to_host() != order) wrong << "merge_sort_pairs\n";
  }
  {  // radix sort of pairs, out of place (stable)
    kiln::prim::radix_sort_pairs(at(d_in), at(d_out), at(d_values), at(d_values_out), 0, s);  // n = 0 first
    DeviceBuffer<std::int32_t> d_vals(values);
    kiln::prim::radix_sort_pairs(at(d_in), at(d_out), at(d_vals), at(d_values_out), n, s);
    stream.sync();
    std::vector<std::int32_t> order = values;
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return in[a] < in[b]; });
    if (d_values_out.to_host() != order) wrong << "radix_sort_pairs\n";
  }
  std::vector<std::int32_t> sorted = in;
  std::sort(sorted.begin(), sorted.end());
  DeviceBuffer<std::int32_t> d_sorted(sorted);
  {  // unique by key
    DeviceBuffer<std::int32_t> d_vals(values);
    DeviceBuffer<std::uint64_t> d_count(1);
    kiln::prim::unique_by_key(at(d_sorted), at(d_vals), at(d_out), at(d_values_out), at(d_count), n, s);
    stream.sync();
    std::vector<std::int32_t> keys, firsts;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 0 || sorted[i] != sorted[i - 1]) keys.push_back(sorted[i]), firsts.push_back(static_cast<std::int32_t>(i));
    }
    const std::uint64_t count = d_count.to_host()[0];
    auto got_keys = d_out.to_host(), got_values = d_values_out.to_host();
    got_keys.resize(std::min<std::uint64_t>(count, n)), got_values.resize(std::min<std::uint64_t>(count, n));
    if (count != keys.size() || got_keys != keys || got_values != firsts) wrong << "unique_by_key\n";
  }
  {  // select indices by mask
    std::vector<std::uint8_t> mask(n);
    for (std::size_t i = 0; i < n; ++i) mask[i] = in[i] % 3 == 0;
    DeviceBuffer<std::uint8_t> d_mask(mask);
    DeviceBuffer<std::int32_t> d_count(1);
    kiln::prim::select_indices(at(d_mask), at(d_out), at(d_count), n, s);
    stream.sync();
    std::vector<std::int32_t> want;
    for (std::size_t i = 0; i < n; ++i)
      if (mask[i]) want.push_back(static_cast<std::int32_t>(i));
    auto got = d_out.to_host();
    got.resize(want.size());
    if (d_count.to_host()[0] != static_cast<std::int32_t>(want.size()) || got != want) wrong << "select_indices\n";
  }
  {  // lower and upper bound
    const auto needles = random_ints(1000, 3, -1100, 1100);
    DeviceBuffer<std::int32_t> d_needles(needles);
    DeviceBuffer<std::int64_t> d_lower(needles.size()), d_upper(needles.size());
    kiln::prim::lower_bound(at(d_sorted), n, at(d_needles), at(d_lower), needles.size(), s);
    kiln::prim::upper_bound(at(d_sorted), n, at(d_needles), at(d_upper), needles.size(), s);
    stream.sync();
    std::vector<std::int64_t> lower, upper;
    for (const std::int32_t x : needles) {
      lower.push_back(std::lower_bound(sorted.begin(), sorted.end(), x) - sorted.begin());
      upper.push_back(std::upper_bound(sorted.begin(), sorted.end(), x) - sorted.begin());
    }
    if (d_lower.to_host() != lower || d_upper.to_host() != upper) wrong << "lower_bound/upper_bound\n";
  }
  {  // segmented sort: segments of 7, 70, 700, ... keys (short, medium and long segments)
    std::vector<std::int32_t> offsets{0};
    for (std::size_t length = 7; offsets.back() + length <= n; length *= 10) offsets.push_back(offsets.back() + length);
    const std::size_t segments = offsets.size() - 1;
    DeviceBuffer<std::int32_t> d_offsets(offsets), d_keys_out(in);  // keys outside every segment stay
    kiln::prim::segmented_sort(at(d_in), at(d_keys_out), n, segments, at(d_offsets), s);
    stream.sync();
    std::vector<std::int32_t> want = in;
    for (std::size_t i = 0; i < segments; ++i) std::sort(want.begin() + offsets[i], want.begin() + offsets[i + 1]);
    if (d_keys_out.to_host() != want) wrong << "segmented_sort\n";
  }
  {  // a plan built without a registry takes the current context's device's
    kiln::prim::ExclusiveSum<std::int32_t> plan;
    if (plan.kernel().context != registry.context()) wrong << "ExclusiveSum() took another device's registry\n";
    plan(at(d_in), at(d_out), n, s);
    stream.sync();
    std::vector<std::int32_t> want(n);
    std::exclusive_scan(in.begin(), in.end(), want.begin(), 0);
    if (d_out.to_host() != want) wrong << "ExclusiveSum plan\n";
  }
  {  // an operator given at run time, linked on this device's registry (compiled once between the devices)
    const kiln::prim::ReduceWith<std::int32_t> plan(
        kiln::prim::Operator{"__device__ int op(int a, int b) { return a > b ? a : b; }"});
    if (plan.kernel().context != registry.context()) wrong << "ReduceWith took another device's registry\n";
    DeviceBuffer<std::int32_t> d_max(1);
    DeviceBuffer<std::uint8_t> d_temp(std::max<std::size_t>(plan.temp_bytes(n), 1));
    plan(at(d_in), at(d_max), n, -2000, kiln::prim::TempStorage{at(d_temp), d_temp.bytes()}, s);
    stream.sync();
    if (d_max.to_host()[0] != *std::max_element(in.begin(), in.end())) wrong << "ReduceWith (max)\n";
  }
  return wrong.str();
}

bool same_arch_everywhere(int devices) {
  for (int d = 1; d < devices; ++d)
    if (kiln::prim::registry(d).device().arch != kiln::prim::registry(0).device().arch) return false;
  return true;
}

}  // namespace

TEST_CASE("primitives: every family on every device at once, one thread each; one library per image") {
  const int n = kiln::test::device_count();
  const kiln::LibraryStats before = kiln::library_stats();
  std::vector<kiln::RegistryStats> stats_before;
  for (int d = 0; d < n; ++d) stats_before.push_back(kiln::prim::registry(d).stats());
  std::vector<std::string> wrong(n);
  std::vector<std::thread> threads;
  for (int d = 0; d < n; ++d) {
    threads.emplace_back([&wrong, d] {
      try {
        wrong[d] = primitives_work(d);
      } catch (const kiln::Error& e) {
        wrong[d] = std::string("kiln::Error: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int d = 0; d < n; ++d) CHECK_MESSAGE(wrong[d].empty(), "device " << d << ": " << wrong[d]);
  // Every device made the same units loaded; on devices of one architecture each image was loaded once and
  // shared by the other devices' registries.
  const kiln::LibraryStats after = kiln::library_stats();
  const std::uint64_t units = kiln::prim::registry(0).stats().unit_loads - stats_before[0].unit_loads;
  CHECK(units > 0);
  for (int d = 1; d < n; ++d) CHECK(kiln::prim::registry(d).stats().unit_loads - stats_before[d].unit_loads == units);
  if (same_arch_everywhere(n)) {
    // An image per unit, or per part of a unit the JIT compiled in parts.
    const std::uint64_t loads = after.loads - before.loads;
    CHECK(loads >= units);
    CHECK(loads <= kiln::prim::catalog().kernels.size());
    CHECK(after.shared - before.shared == loads * (n - 1));
  }
  MESSAGE(n << " devices, primitives: " << units << " units per device, " << after.loads - before.loads
            << " library loads, " << after.shared - before.shared << " shared");
}

TEST_CASE("primitives: a one-shot call runs on its stream's device's registry, and registry() follows the current context") {
  // lower_bound<double> is used by no other case here: the loads counted are this case's.
  const std::vector<double> hay{1, 2, 3, 4, 5}, needles{0.5, 2, 9};
  const std::vector<std::int64_t> want{0, 1, 5};
  kiln::Registry& zero = kiln::prim::registry(0);
  kiln::Registry& one = kiln::prim::registry(1);
  const auto zero_loads = zero.stats().kernel_loads, one_loads = one.stats().kernel_loads;
  {
    const kiln::test::Current current(one);
    CHECK(&kiln::prim::registry() == &one);
    DeviceBuffer<double> d_hay(hay), d_needles(needles);
    DeviceBuffer<std::int64_t> d_out(needles.size());
    kiln::prim::lower_bound(at(d_hay), hay.size(), at(d_needles), at(d_out), needles.size());  // the null stream
    CHECK(d_out.to_host() == want);
  }
  CHECK(one.stats().kernel_loads == one_loads + 1);  // device 1's registry loaded the kernel; device 0's did not
  CHECK(zero.stats().kernel_loads == zero_loads);

  // With device 0 current, a stream of device 1 still runs device 1's plan: the stream decides.
  {
    const kiln::test::Current current_one(one);
    const Stream stream;
    DeviceBuffer<double> d_hay(hay), d_needles(needles);
    DeviceBuffer<std::int64_t> d_out(needles.size());
    const kiln::test::Current current_zero(zero);
    CHECK(&kiln::prim::registry() == &zero);
    kiln::prim::upper_bound(at(d_hay), hay.size(), at(d_needles), at(d_out), needles.size(), stream.get());
    stream.sync();
    CHECK(d_out.to_host() == std::vector<std::int64_t>{0, 2, 5});
  }
  CHECK(zero.stats().kernel_loads == zero_loads);
  CHECK_THROWS_AS(kiln::prim::registry(64), kiln::Error);
  CHECK_THROWS_AS(kiln::prim::registry(-1), kiln::Error);
}

TEST_CASE("primitives: a plan used with another device's stream is refused, naming both devices") {
  kiln::prim::ExclusiveSum<std::int32_t> plan(kiln::prim::registry(0));
  const kiln::test::Current current(kiln::prim::registry(1));
  const Stream stream;
  const std::size_t n = 1000;
  DeviceBuffer<std::int32_t> d_in(std::vector<std::int32_t>(n, 1)), d_out(std::vector<std::int32_t>(n, -7));
  DeviceBuffer<std::uint8_t> d_temp(std::max<std::size_t>(plan.temp_bytes(n), 1));
  for (const bool caller_storage : {true, false}) {
    CAPTURE(caller_storage);
    try {
      if (caller_storage) plan(at(d_in), at(d_out), n, kiln::prim::TempStorage{at(d_temp), d_temp.bytes()}, stream.get());
      else plan(at(d_in), at(d_out), n, stream.get());
      FAIL("device 0's plan ran on device 1's stream");
    } catch (const kiln::Error& e) {
      CHECK(e.code() == kiln::Errc::invalid_argument);
      const std::string what = e.what();
      CHECK(what.find("device 0") != std::string::npos);
      CHECK(what.find("device 1") != std::string::npos);
      CHECK(what.find("exclusive_scan_i32") != std::string::npos);
    }
  }
  stream.sync();
  CHECK(d_out.to_host() == std::vector<std::int32_t>(n, -7));  // nothing ran
  // A plan of device 1 on the same stream runs.
  kiln::prim::ExclusiveSum<std::int32_t> on_one(kiln::prim::registry(1));
  on_one(at(d_in), at(d_out), n, stream.get());
  stream.sync();
  std::vector<std::int32_t> want(n);
  std::iota(want.begin(), want.end(), 0);
  CHECK(d_out.to_host() == want);
}

TEST_CASE("primitives: mixed architectures (KILN_DEVICE_ARCH=1:80): device 1's one-shot calls take sm_80's binary") {
  // The primitives' registries live for the process: a child process starts them with the override.
  ::setenv("KILN_DEVICE_ARCH", "1:80", 1);
  const int status = kiln::test::run_self("--mixed-arch-primitives", "");
  ::unsetenv("KILN_DEVICE_ARCH");
  CHECK(status == 0);
}

namespace kiln::test {

// The child of the case above (main dispatches --mixed-arch-primitives here): 0 when every check held.
int mixed_arch_primitives() {
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) std::printf("mixed architectures, primitives: %s\n", what.c_str()), ++failures;
  };
  kiln::Registry& zero = kiln::prim::registry(0);
  kiln::Registry& one = kiln::prim::registry(1);
  const unsigned real = zero.device().arch;  // the machine's devices are of one kind
  expect(one.device().arch == 80, "device 1 reports sm_" + std::to_string(one.device().arch) + ", not sm_80");
  const kiln::LoadPlan plan = one.plan("exclusive_scan_i32_sweep");
  expect(plan.available && plan.arch <= 80 && plan.arch / 10 == 8,
         "device 1 plans a binary of sm_" + std::to_string(plan.arch) + " (" + plan.reason.message + ")");
  expect(zero.plan("exclusive_scan_i32_sweep").arch / 10 == real / 10, "device 0 no longer plans its own binary");

  const std::size_t n = 100003;
  std::vector<std::int32_t> in(n, 1), want(n);
  std::iota(want.begin(), want.end(), 0);
  {  // device 0's one-shot call runs its own architecture's binary
    const Current current(zero);
    DeviceBuffer<std::int32_t> d_in(in), d_out(n);
    kiln::prim::exclusive_sum(at(d_in), at(d_out), n);
    expect(d_out.to_host() == want, "device 0's exclusive_sum is wrong");
    expect(zero.get("exclusive_scan_i32_sweep").provenance.arch / 10 == real / 10, "device 0 ran another binary");
  }
  {  // device 1's takes sm_80's: it runs where the GPU is an sm_8x, and is refused by the driver elsewhere
    const Current current(one);
    DeviceBuffer<std::int32_t> d_in(in), d_out(n);
    try {
      kiln::prim::exclusive_sum(at(d_in), at(d_out), n);
      expect(real / 10 == 8, "an sm_80 binary ran on an sm_" + std::to_string(real));
      expect(d_out.to_host() == want, "device 1's exclusive_sum is wrong");
      expect(one.get("exclusive_scan_i32_sweep").provenance.arch / 10 == 8, "device 1 ran another binary");
    } catch (const kiln::Error& e) {
      expect(real / 10 != 8, std::string("device 1's exclusive_sum failed: ") + e.what());
      expect(e.code() == kiln::Errc::driver, std::string("not the driver's refusal of the binary: ") + e.what());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace kiln::test
