// What the primitives' tests share: the sizes every spec runs at, random data,
// device arrays poisoned before each run (so an element a kernel failed to write shows), and the tier the
// kernels must have come from in this build.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/prim/common.hpp>

#include <algorithm>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test {

// Makes the primitives' registry context current, as a user's code would have it.
struct PrimContext {
  PrimContext() { kiln::check(kiln::driver().cuCtxPushCurrent(kiln::prim::registry().context()), "push"); }
  ~PrimContext() {
    CUcontext ignored;
    kiln::driver().cuCtxPopCurrent(&ignored);
  }
};

// The sizes every primitive is tested at: empty, one item, a tile's edges, an odd million, and 2^26.
inline std::vector<std::size_t> sizes_around(std::size_t tile) {
  return {0, 1, tile - 1, tile, tile + 1, 1000003, std::size_t{1} << 26};
}

// A device array whose bytes are 0xCD before each run: every element a primitive should write but does not
// keeps a value no correct result has (for the types and value ranges the tests use).
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) {
    kiln::check(kiln::driver().cuMemAlloc(&ptr_, bytes() ? bytes() : 1), "cuMemAlloc");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
  ~DeviceArray() { kiln::driver().cuMemFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == n_);
    if (n_) kiln::check(kiln::driver().cuMemcpyHtoD(ptr_, host.data(), bytes()), "cuMemcpyHtoD");
  }
  void poison() {
    if (n_) kiln::check(kiln::driver().cuMemsetD8(ptr_, 0xCD, bytes()), "cuMemsetD8");
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    if (n_) kiln::check(kiln::driver().cuMemcpyDtoH(host.data(), ptr_, bytes()), "cuMemcpyDtoH");
    return host;
  }
  T* get() const { return reinterpret_cast<T*>(ptr_); }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  std::size_t n_;
  CUdeviceptr ptr_ = 0;
};

inline void synchronize() { kiln::check(kiln::driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

// Uniform integers in [lo, hi] (signed keys get negatives), or reals in [lo, hi).
template <typename T>
std::vector<T> random_vector(std::size_t n, unsigned seed, T lo, T hi) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<T> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  }
  return v;
}

// Bitwise equality (so NaN payloads, -0.0 and +0.0 are told apart); reports the first mismatch.
template <typename T>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want, std::string& where) {
  if (got.size() != want.size()) {
    where = "sizes differ: " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
    return false;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::ostringstream s;
      s << "first difference at [" << i << "] of " << got.size() << ": got " << got[i] << ", want " << want[i];
      where = s.str();
      return false;
    }
  }
  return true;
}

#define KILN_CHECK_SAME(got, want)                        \
  do {                                                    \
    std::string kiln_where_;                              \
    const bool kiln_same_ = kiln::test::same_bits((got), (want), kiln_where_); \
    CHECK_MESSAGE(kiln_same_, kiln_where_);               \
  } while (0)

// The tier a primitive's kernels must come from in this build: embedded when the build's archs include
// this GPU's, otherwise assembled from embedded PTX (when the build has PTX this GPU runs) or compiled by
// the JIT (or, in a later process, read back from disk).
// The architectures the primitives embed (KILN_TEST_ARCHS, "75,80,..."; none with -Dprimitive_archs=none).
inline std::vector<unsigned> embedded_archs() {
  std::vector<unsigned> archs;
  std::stringstream list(KILN_TEST_ARCHS);
  for (std::string a; std::getline(list, a, ',');) archs.push_back(static_cast<unsigned>(std::stoul(a)));
  return archs;
}

inline void check_source(const kiln::Kernel& kernel) {
  const unsigned arch = kiln::prim::registry().device().arch;
  const std::vector<unsigned> archs = embedded_archs();
  const bool embedded = std::find(archs.begin(), archs.end(), arch) != archs.end();
  INFO("kernel ", std::string(kernel.name), " source ", std::string(kiln::to_string(kernel.provenance.source)));
  if (embedded) {
    CHECK(kernel.provenance.source == kiln::Tier::embedded);
  } else {
    const unsigned newest = archs.empty() ? 0 : *std::max_element(archs.begin(), archs.end());
    const kiln::Tier cold = KILN_TEST_EMBED_PTX && newest <= arch ? kiln::Tier::ptx : kiln::Tier::jit;
    CHECK((kernel.provenance.source == cold || kernel.provenance.source == kiln::Tier::disk));
  }
}

}  // namespace kiln::test
