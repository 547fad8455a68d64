// Device-wide exclusive prefix sum (cub::DeviceScan::ExclusiveSum) through kiln's
// registry. Specs: exclusive_scan_i32, exclusive_scan_i64.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

// out[i] = in[0] + … + in[i-1], out[0] = 0. In place (in == out) is allowed.
template <typename T>  // std::int32_t or std::int64_t
class ExclusiveSum {
 public:
  explicit ExclusiveSum(Registry& registry = prim::registry());

  // Temporary storage a call with n items needs.
  std::size_t temp_bytes(std::size_t n) const;

  // Thread-safe: a plan's const calls only read it.
  void operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

  // Items per tile of the sweep kernel under the policy for the loaded binary's architecture.
  std::size_t tile_items() const;

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary.
  const Kernel& kernel() const { return sweep_; }

 private:
  Registry* registry_;
  CUdevice device_;
  Kernel init_, sweep_;
  Workspace workspace_;
};

extern template class ExclusiveSum<std::int32_t>;
extern template class ExclusiveSum<std::int64_t>;

// One-shot: a process-wide plan and stream-ordered temporary storage.
template <typename T>
void exclusive_sum(const T* in, T* out, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
