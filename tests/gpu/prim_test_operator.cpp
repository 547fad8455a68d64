// ReduceWith, TransformReduceWith, ExclusiveScanWith, InclusiveScanWith, SegmentedReduceWith,
// MergeSortPairsWith, SelectIfWith, UniqueByKeyWith (kiln/prim/operator.hpp), on built-in types and Bytes16: operators given at run time as CUDA C++ text, linked into the primitives' linked rows, against CPU
// references at the primitives' test sizes (0, 1, a tile's edges, 1,000,003 and 2^24), outputs poisoned before each
// run (the sort works in place); where the linked kernels come from (JIT, then memory in this registry,
// then disk in another, then from a real redis-server on a machine with an empty disk); and what a bad
// operator gives.
#include "prim_harness.hpp"

#include <kiln/cache.hpp>
#include <kiln/prim/operator.hpp>

#include "remote_test_util.hpp"  // tests/cpu: a real redis-server on a free localhost port

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <bit>
#include <iterator>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kiln::test;

namespace {

constexpr const char* kMaxF = "__device__ float op(float a, float b) { return a > b ? a : b; }";

std::vector<std::size_t> operator_sizes(std::size_t tile) {
  return {0, 1, tile - 1, tile, tile + 1, 1000003, std::size_t{1} << 24};
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// The architecture of a linked unit's code on this GPU: the highest the primitives embed LTO-IR for that
// is not above the GPU's (the build's archs), else the GPU's own (compiled from the unit's source).
unsigned linked_code_arch() {
  const unsigned device = kiln::prim::registry().device().arch;
  unsigned best = 0;
  for (const unsigned arch : embedded_archs()) {
    if (arch <= device) best = std::max(best, arch);
  }
  return best != 0 ? best : device;
}

// Linked kernels come from the JIT tier the first time any process links this text, from disk after.
void check_linked_source(const kiln::Kernel& kernel) {
  INFO("kernel ", std::string(kernel.name), " source ", std::string(kiln::to_string(kernel.provenance.source)));
  CHECK((kernel.provenance.source == kiln::Tier::jit || kernel.provenance.source == kiln::Tier::disk));
  // A plan picks CUB's policies by it: it must be the code's, the embedded LTO-IR's when it was linked.
  CHECK(kernel.provenance.arch == linked_code_arch());
  CHECK_FALSE(kernel.provenance.cache_key.empty());
}

}  // namespace

TEST_CASE("operator: a float max-reduce with a run-time operator matches the CPU, with owned and caller storage") {
  PrimContext context;
  kiln::prim::ReduceWith<float> plan({kMaxF});
  check_linked_source(plan.kernel());
  unsigned seed = 7;
  const float lowest = -std::numeric_limits<float>::infinity();
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<float>(n, seed++, -1e6f, 1e6f);
    const float want = std::accumulate(in.begin(), in.end(), lowest, [](float a, float b) { return a > b ? a : b; });
    DeviceArray<float> d_in(in), out(1);
    out.poison();
    plan(d_in.get(), out.get(), n, lowest);
    KILN_CHECK_SAME(out.download(), std::vector<float>{want});
    DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
    out.poison();
    plan(d_in.get(), out.get(), n, lowest, kiln::prim::TempStorage{temp.get(), temp.size()});
    KILN_CHECK_SAME(out.download(), std::vector<float>{want});
  }
}

TEST_CASE("operator: an exclusive scan and an inclusive scan with run-time operators match the CPU") {
  PrimContext context;
  // Wrapping int sums (exact in any order), and a running xor of 64-bit words.
  kiln::prim::ExclusiveScanWith<std::int32_t> sums(
      {"__device__ int add(int a, int b) { return int(unsigned(a) + unsigned(b)); }", "add"});
  kiln::prim::InclusiveScanWith<std::uint64_t> xors(
      {"__device__ unsigned long long op(const unsigned long long& a, const unsigned long long& b) { return a ^ b; }"});
  check_linked_source(sums.kernel());
  check_linked_source(xors.kernel());
  unsigned seed = 70;
  for (std::size_t n : operator_sizes(sums.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::int32_t>(n, seed++, std::numeric_limits<std::int32_t>::min(),
                                                std::numeric_limits<std::int32_t>::max());
    std::vector<std::int32_t> want(n);
    std::uint32_t running = 5;
    for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<std::int32_t>(running), running += std::uint32_t(in[i]);
    DeviceArray<std::int32_t> d_in(in), out(n);
    out.poison();
    sums(d_in.get(), out.get(), n, 5);
    KILN_CHECK_SAME(out.download(), want);
  }
  for (std::size_t n : operator_sizes(xors.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::uint64_t>(n, seed++, 0, std::numeric_limits<std::uint64_t>::max());
    std::vector<std::uint64_t> want(n);
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < n; ++i) want[i] = running ^= in[i];
    DeviceArray<std::uint64_t> d_in(in), out(n);
    out.poison();
    DeviceArray<std::uint8_t> temp(xors.temp_bytes(n));
    xors(d_in.get(), out.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
    KILN_CHECK_SAME(out.download(), want);
  }
}

TEST_CASE("operator: a linked plan is memory the second time in a registry, disk in another registry") {
  PrimContext context;
  const kiln::prim::Operator op{"__device__ double op(double a, double b) { return a < b ? a : b; }"};
  kiln::prim::ReduceWith<double> first(op);
  check_linked_source(first.kernel());
  kiln::prim::ReduceWith<double> again(op);
  CHECK(again.kernel().provenance.tier == kiln::Tier::memory);
  CHECK(again.kernel().provenance.cache_key == first.kernel().provenance.cache_key);
  // Another registry (as another process would be) with the same disk cache reads it back.
  kiln::Registry other(kiln::prim::catalog());
  kiln::prim::ReduceWith<double> elsewhere(op, other);
  if (kiln::default_cache().usable()) {
    CHECK(elsewhere.kernel().provenance.source == kiln::Tier::disk);
    CHECK(elsewhere.kernel().provenance.load_ms < 50);
    MESSAGE("linked reduce from disk in another registry: " << elsewhere.kernel().provenance.load_ms << " ms");
  }
  const auto in = random_vector<double>(100000, 3, -1.0, 1.0);
  DeviceArray<double> d_in(in), out(1);
  out.poison();
  elsewhere(d_in.get(), out.get(), in.size(), 2.0);
  KILN_CHECK_SAME(out.download(), std::vector<double>{*std::min_element(in.begin(), in.end())});
}

TEST_CASE("operator: a linked unit one machine built is served to the next from Redis, launched and checked") {
  KILN_SKIP_WITHOUT_REDIS();
  PrimContext context;
  kiln::test::RedisServer server;
  const kiln::prim::Operator op{"__device__ double op(double a, double b) { return a > b ? a : b; }"};
  kiln::test::FleetMachine first(kiln::prim::catalog(), server.url());
  kiln::prim::ReduceWith<double> built(op, first.registry);
  CHECK(built.kernel().provenance.source == kiln::Tier::jit);
  CHECK(first.remote.stats().stores == 1);

  kiln::test::FleetMachine second(kiln::prim::catalog(), server.url());
  kiln::prim::ReduceWith<double> fetched(op, second.registry);
  CHECK(fetched.kernel().provenance.source == kiln::Tier::remote);
  CHECK(fetched.kernel().provenance.cache_key == built.kernel().provenance.cache_key);
  CHECK(fetched.kernel().provenance.arch == linked_code_arch());
  CHECK(second.registry.stats().jit_compiles == 0);
  CHECK(second.registry.stats().remote_loads == 1);
  CHECK(second.remote.stats().hits == 1);
  CHECK(second.disk.stats().entries == 1);  // on this machine's disk too: its next process needs no network
  MESSAGE("linked reduce from the remote cache: " << fetched.kernel().provenance.load_ms << " ms");
  const auto in = random_vector<double>(100000, 4, -1.0, 1.0);
  DeviceArray<double> d_in(in), out(1);
  out.poison();
  fetched(d_in.get(), out.get(), in.size(), -2.0);
  KILN_CHECK_SAME(out.download(), std::vector<double>{*std::max_element(in.begin(), in.end())});
}

TEST_CASE("operator: a bad operator is a compile error with NVRTC's log and the text; a wrong signature names both types") {
  PrimContext context;
  // A registry of the test's own: its destructor runs here, after links that failed (a failed link
  // once left an empty slot that the destructor dereferenced).
  kiln::Registry local(kiln::prim::catalog());
  const std::string broken = "__device__ float op(float a, float b) { return a >> b; }";
  try {
    kiln::prim::ReduceWith<float> plan({broken}, local);
    FAIL("an operator that does not compile built a plan");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(contains(e.what(), broken));
    CHECK(contains(e.what(), "error"));
  }
  try {
    kiln::prim::ReduceWith<float> plan({"__device__ int op(int a, int b) { return a > b ? a : b; }"}, local);
    FAIL("an operator of the wrong signature built a plan");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(contains(e.what(), "operator 'op' is int (int, int)"));
    CHECK(contains(e.what(), "float(float, float)"));
  }
  // After the failures, the same registry links a good operator.
  kiln::prim::ReduceWith<float> good({kMaxF}, local);
  check_linked_source(good.kernel());
}

TEST_CASE("operator: a descending stable merge sort by a run-time comparator matches std::stable_sort") {
  PrimContext context;
  kiln::prim::MergeSortPairsWith<float> plan({"__device__ bool op(const float& a, const float& b) { return a > b; }"});
  check_linked_source(plan.kernel());
  unsigned seed = 90;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    // Whole numbers below 1000: many equal keys, so stability shows in the values' order.
    auto keys = random_vector<float>(n, seed++, 0.0f, 1000.0f);
    for (float& k : keys) k = float(int(k));
    std::vector<std::int32_t> values(n);
    std::iota(values.begin(), values.end(), 0);
    std::vector<std::int32_t> order = values;
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return keys[a] > keys[b]; });
    std::vector<float> want_keys(n);
    for (std::size_t i = 0; i < n; ++i) want_keys[i] = keys[order[i]];
    DeviceArray<float> d_keys(keys);
    DeviceArray<std::int32_t> d_values(values);
    if (n % 2) {
      plan(d_keys.get(), d_values.get(), n);
    } else {
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      plan(d_keys.get(), d_values.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
    }
    KILN_CHECK_SAME(d_keys.download(), want_keys);
    KILN_CHECK_SAME(d_values.download(), order);
  }
  try {
    kiln::prim::MergeSortPairsWith<float> wrong({"__device__ float op(float a, float b) { return a - b; }"});
    FAIL("a comparator of the wrong signature built a plan");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(contains(e.what(), "operator 'op' is float (float, float)"));
    CHECK(contains(e.what(), "calls it as bool(float, float)"));
  }
}

TEST_CASE("operator: a select with a run-time predicate matches std::copy_if, count and order") {
  PrimContext context;
  // Keeps the multiples of 3: about a third of the items, in random places.
  kiln::prim::SelectIfWith<std::int64_t> plan({"__device__ bool op(long long x) { return x % 3 == 0; }"});
  check_linked_source(plan.kernel());
  unsigned seed = 110;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::int64_t>(n, seed++, -1'000'000'000'000, 1'000'000'000'000);
    std::vector<std::int64_t> want;
    std::copy_if(in.begin(), in.end(), std::back_inserter(want), [](std::int64_t x) { return x % 3 == 0; });
    DeviceArray<std::int64_t> d_in(in), out(n), count(1);
    out.poison();
    count.poison();
    if (n % 2) {
      plan(d_in.get(), out.get(), count.get(), n);
    } else {
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      plan(d_in.get(), out.get(), count.get(), n, kiln::prim::TempStorage{temp.get(), temp.size()});
    }
    KILN_CHECK_SAME(count.download(), std::vector<std::int64_t>{std::int64_t(want.size())});
    std::vector<std::int64_t> got = out.download();
    got.resize(want.size());
    KILN_CHECK_SAME(got, want);
  }
}

TEST_CASE("operator: unique by key with a run-time equality keeps the first pair of each run") {
  PrimContext context;
  // Keys equal when in the same tens: runs of sorted keys 0-9, 10-19, … collapse to their first pair.
  kiln::prim::UniqueByKeyWith<std::int32_t> plan({"__device__ bool op(int a, int b) { return a / 10 == b / 10; }"});
  check_linked_source(plan.kernel());
  unsigned seed = 130;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    auto keys = random_vector<std::int32_t>(n, seed++, 0, std::int32_t(std::max<std::size_t>(n, 1) * 3));
    std::sort(keys.begin(), keys.end());
    std::vector<std::int32_t> values(n);
    std::iota(values.begin(), values.end(), 0);
    std::vector<std::int32_t> want_keys, want_values;
    for (std::size_t i = 0; i < n; ++i) {
      if (i == 0 || keys[i] / 10 != keys[i - 1] / 10) want_keys.push_back(keys[i]), want_values.push_back(values[i]);
    }
    DeviceArray<std::int32_t> d_keys(keys), d_values(values), keys_out(n), values_out(n);
    DeviceArray<std::uint64_t> count(1);
    keys_out.poison();
    values_out.poison();
    count.poison();
    if (n % 2) {
      plan(d_keys.get(), d_values.get(), keys_out.get(), values_out.get(), count.get(), n);
    } else {
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      plan(d_keys.get(), d_values.get(), keys_out.get(), values_out.get(), count.get(), n,
           kiln::prim::TempStorage{temp.get(), temp.size()});
    }
    KILN_CHECK_SAME(count.download(), std::vector<std::uint64_t>{want_keys.size()});
    std::vector<std::int32_t> got_keys = keys_out.download(), got_values = values_out.download();
    got_keys.resize(want_keys.size());
    got_values.resize(want_values.size());
    KILN_CHECK_SAME(got_keys, want_keys);
    KILN_CHECK_SAME(got_values, want_values);
  }
}

TEST_CASE("operator: a segmented max with a run-time operator matches the CPU, empty segments getting init") {
  PrimContext context;
  kiln::prim::SegmentedReduceWith<std::int64_t> plan(
      {"__device__ long long op(long long a, long long b) { return a > b ? a : b; }"});
  check_linked_source(plan.kernel());
  const std::int64_t init = std::numeric_limits<std::int64_t>::min();
  unsigned seed = 150;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::int64_t>(n, seed++, -1'000'000'000'000, 1'000'000'000'000);
    // Segments of 0 to 3 tiles (empty ones among them), covering all n items.
    std::vector<std::int32_t> offsets{0};
    std::mt19937 rng(seed);
    while (std::size_t(offsets.back()) < n) {
      const std::size_t length = rng() % (3 * plan.tile_items() + 1);
      offsets.push_back(std::int32_t(std::min(n, std::size_t(offsets.back()) + length)));
    }
    const std::size_t segments = offsets.size() - 1;
    std::vector<std::int64_t> want(segments, init);
    for (std::size_t s = 0; s < segments; ++s) {
      for (std::int32_t i = offsets[s]; i < offsets[s + 1]; ++i) want[s] = std::max(want[s], in[i]);
    }
    DeviceArray<std::int64_t> d_in(in), out(segments);
    DeviceArray<std::int32_t> d_offsets(offsets);
    out.poison();
    if (n % 2) {
      plan(d_in.get(), out.get(), segments, d_offsets.get(), init);
    } else {
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(segments));
      plan(d_in.get(), out.get(), segments, d_offsets.get(), init, kiln::prim::TempStorage{temp.get(), temp.size()});
    }
    KILN_CHECK_SAME(out.download(), want);
  }
}

TEST_CASE("operator: a transform-iterator reduce with both operators given at run time matches the CPU") {
  PrimContext context;
  // Sum of squares of whole numbers below 1000 in double: exact in any order up to 2^24 items.
  kiln::prim::TransformReduceWith<double> plan({"__device__ double sq(double x) { return x * x; }", "sq"},
                                               {"__device__ double op(double a, double b) { return a + b; }"});
  check_linked_source(plan.kernel());
  unsigned seed = 170;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    auto in = random_vector<double>(n, seed++, 0.0, 1000.0);
    for (double& x : in) x = double(int(x));
    double want = 0.5;  // init
    for (double x : in) want += x * x;
    DeviceArray<double> d_in(in), out(1);
    out.poison();
    if (n % 2) {
      plan(d_in.get(), out.get(), n, 0.5);
    } else {
      DeviceArray<std::uint8_t> temp(plan.temp_bytes(n));
      plan(d_in.get(), out.get(), n, 0.5, kiln::prim::TempStorage{temp.get(), temp.size()});
    }
    KILN_CHECK_SAME(out.download(), std::vector<double>{want});
  }
  // A wrong signature names the operator it is about.
  try {
    kiln::prim::TransformReduceWith<double> wrong({"__device__ float sq(float x) { return x * x; }", "sq"},
                                                  {"__device__ double op(double a, double b) { return a + b; }"});
    FAIL("a transform of the wrong signature built a plan");
  } catch (const kiln::Error& e) {
    CHECK(contains(e.what(), "operator 'sq' is float (float)"));
    CHECK(contains(e.what(), "calls it as double(double)"));
  }
}

TEST_CASE("operator: a transform with a run-time operator matches the CPU, aligned or not, and in place") {
  PrimContext context;
  kiln::prim::TransformWith<std::int64_t> plan({"__device__ long long op(long long x) { return 3 * x - 7; }"});
  check_linked_source(plan.kernel());
  CHECK(plan.temp_bytes(1000) == 0);
  unsigned seed = 190;
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<std::int64_t>(n + 1, seed++, -1'000'000'000, 1'000'000'000);
    std::vector<std::int64_t> want(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) want[i] = 3 * in[i] - 7;
    DeviceArray<std::int64_t> d_in(in), out(n + 1);
    // Aligned: in[0, n) to out[0, n); the item after them keeps its poison.
    out.poison();
    const std::int64_t poison = out.download().back();
    plan(d_in.get(), out.get(), n);
    auto got = out.download();
    KILN_CHECK_SAME(std::vector<std::int64_t>(got.begin(), got.begin() + long(n)),
                    std::vector<std::int64_t>(want.begin(), want.begin() + long(n)));
    CHECK(got.back() == poison);
    // Neither pointer on a 128-byte boundary (the bulk copy's alignment): in[1, n + 1) to out[1, n + 1).
    out.poison();
    plan(d_in.get() + 1, out.get() + 1, n);
    got = out.download();
    CHECK(got.front() == poison);
    KILN_CHECK_SAME(std::vector<std::int64_t>(got.begin() + 1, got.end()),
                    std::vector<std::int64_t>(want.begin() + 1, want.end()));
    // In place.
    plan(d_in.get(), d_in.get(), n + 1);
    KILN_CHECK_SAME(d_in.download(), want);
  }
  kiln::prim::TransformWith<float> halve({"__device__ float op(const float& x) { return x * 0.5f; }"});
  const std::size_t n = 1000003;
  const auto in = random_vector<float>(n, 7, -1e6f, 1e6f);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = in[i] * 0.5f;
  DeviceArray<float> d_in(in), out(n);
  out.poison();
  halve(d_in.get(), out.get(), n);
  KILN_CHECK_SAME(out.download(), want);
  // A wrong signature names both.
  try {
    kiln::prim::TransformWith<float> wrong({"__device__ double op(double x) { return x; }"});
    FAIL("a transform of the wrong signature built a plan");
  } catch (const kiln::Error& e) {
    CHECK(contains(e.what(), "operator 'op' is double (double)"));
    CHECK(contains(e.what(), "calls it as float(float)"));
  }
}

namespace {

// What a caller with its own compiler hands kiln: LTO-IR for this device (NVRTC -dlto, loaded here the way
// a caller would) of a translation unit defining the function the kernels call, without kiln's header.
std::string caller_lto_ir(const std::string& definition, unsigned arch) {
  void* lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
  REQUIRE_MESSAGE(lib != nullptr, "libnvrtc: " << dlerror());
  const auto create = reinterpret_cast<decltype(&nvrtcCreateProgram)>(dlsym(lib, "nvrtcCreateProgram"));
  const auto compile = reinterpret_cast<decltype(&nvrtcCompileProgram)>(dlsym(lib, "nvrtcCompileProgram"));
  const auto ir_size = reinterpret_cast<decltype(&nvrtcGetLTOIRSize)>(dlsym(lib, "nvrtcGetLTOIRSize"));
  const auto get_ir = reinterpret_cast<decltype(&nvrtcGetLTOIR)>(dlsym(lib, "nvrtcGetLTOIR"));
  const auto destroy = reinterpret_cast<decltype(&nvrtcDestroyProgram)>(dlsym(lib, "nvrtcDestroyProgram"));
  REQUIRE((create && compile && ir_size && get_ir && destroy));
  const std::string source =
      "namespace kiln_prim { template <typename R, typename... A> __device__ R linked_operator(A... a); }\n" +
      definition;
  nvrtcProgram program = nullptr;
  REQUIRE(create(&program, source.c_str(), "caller.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  const std::string arch_option = "-arch=compute_" + std::to_string(arch);
  const char* options[] = {arch_option.c_str(), "-dlto", "-rdc=true"};
  std::string ir;
  std::size_t size = 0;
  if (compile(program, 3, options) == NVRTC_SUCCESS && ir_size(program, &size) == NVRTC_SUCCESS) {
    ir.resize(size);
    if (get_ir(program, ir.data()) != NVRTC_SUCCESS) ir.clear();
  }
  destroy(&program);
  dlclose(lib);
  REQUIRE_FALSE(ir.empty());
  return ir;
}

}  // namespace

TEST_CASE("operator: an operator given as LTO-IR the caller compiled reduces as its text would") {
  PrimContext context;
  const unsigned arch = kiln::prim::registry().device().arch;
  kiln::prim::Operator op;
  op.lto_ir = caller_lto_ir("template <> __device__ float kiln_prim::linked_operator<float, float, float>"
                            "(float a, float b) { return a > b ? a : b; }\n",
                            arch);
  kiln::prim::ReduceWith<float> plan(op);
  check_linked_source(plan.kernel());
  const float lowest = -std::numeric_limits<float>::infinity();
  for (std::size_t n : operator_sizes(plan.tile_items())) {
    CAPTURE(n);
    const auto in = random_vector<float>(n, unsigned(190 + n % 7), -1e6f, 1e6f);
    const float want = std::accumulate(in.begin(), in.end(), lowest, [](float a, float b) { return a > b ? a : b; });
    DeviceArray<float> d_in(in), out(1);
    out.poison();
    plan(d_in.get(), out.get(), n, lowest);
    KILN_CHECK_SAME(out.download(), std::vector<float>{want});
  }
  // LTO-IR that defines another function: the kernels' call is unresolved, and the error says where.
  kiln::prim::Operator wrong;
  wrong.lto_ir = caller_lto_ir(
      "template <> __device__ int kiln_prim::linked_operator<int, int, int>(int a, int b) { return a; }\n", arch);
  try {
    kiln::prim::ReduceWith<float> plan_wrong(wrong);
    FAIL("LTO-IR without the kernels' function built a plan");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::compile);
    CHECK(contains(e.what(), "nvJitLink"));
    CHECK(contains(e.what(), "linked_operator"));  // ptxas: "Unresolved extern function '…linked_operator…'"
  }
}

namespace {

// A 16-byte struct as Bytes16 carries it: the operator sees kiln_prim::bytes16 and copies the struct in and
// out (what the Python module does for a structured dtype of 16 bytes).
struct KeyWeight {
  std::int64_t key;
  double w;
};
constexpr const char* kKeyWeight = "struct KeyWeight { long long key; double w; };\n"
                                   "__device__ KeyWeight as_struct(const kiln_prim::bytes16& b) {\n"
                                   "  KeyWeight s; memcpy(&s, &b, sizeof s); return s; }\n"
                                   "__device__ kiln_prim::bytes16 as_bytes(const KeyWeight& s) {\n"
                                   "  kiln_prim::bytes16 b; memcpy(&b, &s, sizeof b); return b; }\n";

std::vector<kiln::prim::Bytes16> key_weights(std::size_t n, unsigned seed) {
  const auto w = random_vector<double>(n, seed, -1e6, 1e6);
  std::vector<kiln::prim::Bytes16> items(n);
  for (std::size_t i = 0; i < n; ++i) items[i] = std::bit_cast<kiln::prim::Bytes16>(KeyWeight{std::int64_t(i), w[i]});
  return items;
}

// The items' keys and weights, bit for bit (same_bits reports the first that differs).
std::vector<std::int64_t> keys_of(const std::vector<kiln::prim::Bytes16>& items) {
  std::vector<std::int64_t> keys;
  for (const auto& b : items) keys.push_back(std::bit_cast<KeyWeight>(b).key);
  return keys;
}
std::vector<double> weights_of(const std::vector<kiln::prim::Bytes16>& items) {
  std::vector<double> w;
  for (const auto& b : items) w.push_back(std::bit_cast<KeyWeight>(b).w);
  return w;
}

}  // namespace

TEST_CASE("operator: a 16-byte struct rides Bytes16 through a reduce, an inclusive scan and a merge sort") {
  PrimContext context;
  using kiln::prim::Bytes16;
  kiln::prim::ReduceWith<Bytes16> heaviest({std::string(kKeyWeight) +
                                            "__device__ kiln_prim::bytes16 op(kiln_prim::bytes16 a, kiln_prim::bytes16 b) "
                                            "{ return as_struct(a).w < as_struct(b).w ? b : a; }"});
  check_linked_source(heaviest.kernel());
  kiln::prim::InclusiveScanWith<Bytes16> sums({std::string(kKeyWeight) +
                                               "__device__ kiln_prim::bytes16 op(kiln_prim::bytes16 a, kiln_prim::bytes16 b) "
                                               "{ KeyWeight s = as_struct(a); s.key += as_struct(b).key; "
                                               "s.w += as_struct(b).w; return as_bytes(s); }"});
  kiln::prim::MergeSortPairsWith<Bytes16> by_weight({std::string(kKeyWeight) +
                                                     "__device__ bool op(kiln_prim::bytes16 a, kiln_prim::bytes16 b) "
                                                     "{ return as_struct(a).w < as_struct(b).w; }"});
  unsigned seed = 160;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000003}}) {
    CAPTURE(n);
    const auto items = key_weights(n, seed++);
    const Bytes16 none = std::bit_cast<Bytes16>(KeyWeight{-1, -std::numeric_limits<double>::infinity()});
    std::vector<Bytes16> want_max{none};
    for (const auto& b : items) {
      if (std::bit_cast<KeyWeight>(want_max[0]).w < std::bit_cast<KeyWeight>(b).w) want_max[0] = b;
    }
    DeviceArray<Bytes16> d_items(items), out(1);
    out.poison();
    heaviest(d_items.get(), out.get(), n, none);
    KILN_CHECK_SAME(keys_of(out.download()), keys_of(want_max));
    KILN_CHECK_SAME(weights_of(out.download()), weights_of(want_max));

    // whole-number weights: the sums are exact in any order
    std::vector<Bytes16> whole(n), want_sums(n);
    KeyWeight running{0, 0.0};
    for (std::size_t i = 0; i < n; ++i) {
      const KeyWeight s{std::int64_t(i % 7), double(std::int64_t(std::bit_cast<KeyWeight>(items[i]).w) % 1000)};
      whole[i] = std::bit_cast<Bytes16>(s);
      running = {running.key + s.key, running.w + s.w};
      want_sums[i] = std::bit_cast<Bytes16>(running);
    }
    DeviceArray<Bytes16> d_whole(whole), scanned(n);
    scanned.poison();
    sums(d_whole.get(), scanned.get(), n);
    KILN_CHECK_SAME(keys_of(scanned.download()), keys_of(want_sums));
    KILN_CHECK_SAME(weights_of(scanned.download()), weights_of(want_sums));

    std::vector<std::int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return std::bit_cast<KeyWeight>(whole[a]).w < std::bit_cast<KeyWeight>(whole[b]).w;
    });
    std::vector<Bytes16> want_sorted(n);
    for (std::size_t i = 0; i < n; ++i) want_sorted[i] = whole[order[i]];
    std::vector<std::int32_t> values(n);
    std::iota(values.begin(), values.end(), 0);
    DeviceArray<std::int32_t> d_values(values);
    by_weight(d_whole.get(), d_values.get(), n);
    KILN_CHECK_SAME(keys_of(d_whole.download()), keys_of(want_sorted));
    KILN_CHECK_SAME(weights_of(d_whole.download()), weights_of(want_sorted));
    KILN_CHECK_SAME(d_values.download(), order);
  }
}
