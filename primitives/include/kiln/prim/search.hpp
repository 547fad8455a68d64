// Vectorised binary search: for each needle, its insertion position in a sorted
// haystack (numpy/CuPy's searchsorted, side 'left' or 'right'), through kiln's registry.
// Specs: lower_bound_<T>, upper_bound_<T> (i32, i64, f64, u64, …).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

enum class Side {
  lower,  // std::lower_bound: the first position whose element is not less than the needle
  upper,  // std::upper_bound: the first position whose element is greater than the needle
};

// out[i] = the position of needles[i] in haystack[0, haystack_size), as std::lower_bound / std::upper_bound
// with operator< give it, as a 64-bit index (numpy's and CuPy's searchsorted return int64). The haystack
// must be sorted ascending by operator<; for doubles that means without NaN. Needles may be anything and in
// any order: every comparison is operator<, so a NaN needle compares false both ways and gets 0 (lower) or
// haystack_size (upper), and -0.0 equals +0.0 (unlike numpy, which sorts NaN last). All pointers are
// device pointers; haystack_size and num_needles are limited to 2^32 - 1 (kiln::Error, Errc::invalid_argument, beyond).
// Needs no temporary storage.
template <typename T, Side S>  // a pair of KILN_PRIM_SORTED_SEARCH_TYPES
class SortedSearch : detail::PlanBase {
 public:
  explicit SortedSearch(Registry& registry = prim::registry());

  // Thread-safe: a plan's calls only read it.
  void operator()(const T* haystack, std::size_t haystack_size, const T* needles, std::int64_t* out,
                  std::size_t num_needles, CUstream stream = nullptr) const;

  // Needles per block of the kernel (a tile) under the policy for the loaded binary's architecture.
  std::size_t tile_items() const;

  // Where the kernel came from (embedded, disk, JIT) and the arch of its binary.
  const Kernel& kernel() const { return kernel_; }

 private:
  Kernel kernel_;
};

template <typename T>
using LowerBound = SortedSearch<T, Side::lower>;
template <typename T>
using UpperBound = SortedSearch<T, Side::upper>;

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(T, S) extern template class SortedSearch<T, Side::S>;
KILN_PRIM_SORTED_SEARCH_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device.
template <typename T>
void lower_bound(const T* haystack, std::size_t haystack_size, const T* needles, std::int64_t* out,
                 std::size_t num_needles, CUstream stream = nullptr);
template <typename T>
void upper_bound(const T* haystack, std::size_t haystack_size, const T* needles, std::int64_t* out,
                 std::size_t num_needles, CUstream stream = nullptr);

}  // namespace kiln::prim
