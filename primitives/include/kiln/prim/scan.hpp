// Device-wide exclusive prefix sum (cub::DeviceScan::ExclusiveSum) through kiln's
// registry. Specs: exclusive_scan_i32, exclusive_scan_i64.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

namespace detail {
template <typename T>
struct ExclusiveSumPlan;  // ExclusiveScan<T, plus> on the unit exclusive_scan_<T> (primitives/src/scan.cu)
}  // namespace detail

// out[i] = in[0] + … + in[i-1], out[0] = 0. In place (in == out) is allowed.
template <typename T>  // std::int32_t or std::int64_t
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

extern template class ExclusiveSum<std::int32_t>;
extern template class ExclusiveSum<std::int64_t>;

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename T>
void exclusive_sum(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
