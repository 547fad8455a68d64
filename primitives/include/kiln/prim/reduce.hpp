// Device-wide sum (cub::DeviceReduce::Sum) through kiln's registry.
// Specs: reduce_<T> (i32, f64, …), a row each in kernels/primitives.toml.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

namespace detail {
template <typename T>
struct ReduceSumPlan;  // Reduce<T, plus> on the unit reduce_<T> (primitives/src/reduce.cu)
}  // namespace detail

// *out = T{} + (in[0] + … + in[n-1]): one value, written to device memory; n = 0 writes T{}.
//
// The sum is CUB's: the same kernels, tuning and launch shapes as cub::DeviceReduce::Sum called with an
// int item count, so the same order of additions. What follows from that:
//  - std::int32_t wraps (two's complement), like the GPU's integer addition;
//  - double is added in CUB's tree order, not left to right, so it differs from a sequential sum by
//    rounding: by at most sum(|in[i]|) times 2^-53 times the longest chain of additions (per-thread runs,
//    then log2 of the block and of the grid: about a hundred at 2^26 items). It is the same from run to run
//    for one plan. Inputs of more than one tile (tile_items()) are spread over a grid sized by the
//    sweep kernel's occupancy, which is a property of the loaded binary: an embedded and a JIT-compiled
//    kernel, or two GPUs, may round differently (as CUB built for two architectures does);
//  - the zero-initialised start value takes part: a sum of -0.0 alone is +0.0, and an integer-valued
//    double sum that stays below 2^53 is exact in any order.
template <typename T>  // a type of KILN_PRIM_REDUCE_SUM_TYPES
class ReduceSum : public detail::FixedPlan<detail::ReduceSumPlan<T>> {
 public:
  explicit ReduceSum(Registry& registry = prim::registry());

  // Thread-safe: a plan's const calls only read it. `out` is one T of device memory, not part of `in`.
  void operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

  // From detail::FixedPlan: temp_bytes(n), the temporary storage a call with n items needs (1 byte when n fits one
  // tile: CUB asks for it, never uses it); tile_items(), the most items the single-tile kernel reduces alone under
  // the policy for the loaded binary's architecture (more take two passes: per-block partial sums, then the sum of
  // those); kernel(), where the kernels came from (embedded, disk, JIT) and the arch of their binary: the sweep
  // kernel.
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(T) extern template class ReduceSum<T>;
KILN_PRIM_REDUCE_SUM_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename T>
void reduce_sum(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
