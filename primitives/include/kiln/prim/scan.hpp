// Device-wide exclusive prefix sum (cub::DeviceScan::ExclusiveSum) through kiln's
// registry. Specs: exclusive_scan_<T> (i32, i64, …), a row each in kernels/primitives.toml.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

namespace detail {
template <typename T>
struct ExclusiveSumPlan;  // ExclusiveScan<T, plus> on the unit exclusive_scan_<T> (primitives/src/scan.cu)
}  // namespace detail

// out[i] = in[0] + … + in[i-1], out[0] = 0. In place (in == out) is allowed.
template <typename T>  // a type of KILN_PRIM_EXCLUSIVE_SUM_TYPES
class ExclusiveSum : public detail::FixedPlan<detail::ExclusiveSumPlan<T>> {
 public:
  explicit ExclusiveSum(Registry& registry = prim::registry());

  // Thread-safe: a plan's const calls only read it.
  void operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

  // From detail::FixedPlan: temp_bytes(n), the temporary storage a call with n items needs; tile_items(), the items
  // per tile of the sweep kernel under the policy for the loaded binary's architecture; kernel(), where the kernels
  // came from (embedded, disk, JIT) and the arch of their binary.
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(T) extern template class ExclusiveSum<T>;
KILN_PRIM_EXCLUSIVE_SUM_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename T>
void exclusive_sum(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
