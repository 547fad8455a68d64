// Exclusive sum: the types kiln's scan kernels are instantiated with, shared by the
// kernel units (templates/families/prim_exclusive_sum.cu.j2) and the host dispatch (primitives/src/scan.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>

#include <cub/device/dispatch/kernels/scan.cuh>
#include <cub/device/dispatch/tuning/tuning_scan.cuh>

#include <cuda/std/functional>

namespace kiln_prim {

// cub::DeviceScan::ExclusiveSum over T* with 32-bit item counts, spelled out.
template <typename T>
struct exclusive_sum {
  using value_t = T;
  using input_t = const T*;
  using output_t = T*;
  using op_t = ::cuda::std::plus<>;
  using init_t = cub::detail::InputValue<T>;
  using offset_t = unsigned int;
  using accum_t = T;
  using policy_hub = cub::detail::scan::policy_hub<T, T, accum_t, offset_t, op_t>;
  using max_policy = typename policy_hub::MaxPolicy;
  using tile_state = cub::ScanTileState<accum_t>;
};

}  // namespace kiln_prim
