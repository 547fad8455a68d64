// Scans: the types kiln's scan kernels are instantiated with, shared by the kernel units
// (families kiln.exclusive_scan, kiln.inclusive_scan, prim.exclusive_scan) and the host dispatch (kiln/prim/scan_plan.cuh).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>
#include <kiln_prim/iterators.cuh>

#include <cub/device/dispatch/kernels/scan.cuh>
#include <cub/device/dispatch/tuning/tuning_scan.cuh>

#include <cuda/functional>  // ::cuda::maximum<>, ::cuda::minimum<>: operators a row may name
#include <cuda/std/functional>

namespace kiln_prim {

// cub::DeviceScan::ExclusiveScan(temp, bytes, const T*, T*, Op, InitT init, int num_items) spelled out
// (device_scan.cuh): unsigned 32-bit offsets, AccumT and PolicyHub as DispatchScan's defaults. In: the input
// iterator, void for const T* (kiln_prim/iterators.cuh for lazy ones).
template <typename T, typename Op, typename In = void, typename InitT = T>
struct exclusive_scan {
  using value_t = T;
  using input_t = input_iterator_t<T, In>;
  using output_t = T*;
  using op_t = Op;
  using init_value_t = InitT;
  using init_t = cub::detail::InputValue<InitT>;
  using offset_t = unsigned int;
  using accum_t = ::cuda::std::__accumulator_t<Op, cub::detail::it_value_t<input_t>, InitT>;
  using policy_hub = cub::detail::scan::policy_hub<cub::detail::it_value_t<input_t>, T, accum_t, offset_t, op_t>;
  using max_policy = typename policy_hub::MaxPolicy;
  using tile_state = cub::ScanTileState<accum_t>;
};

// cub::DeviceScan::InclusiveScan(temp, bytes, const T*, T*, Op, int num_items) spelled out: no initial
// value (NullType), otherwise as exclusive_scan.
template <typename T, typename Op, typename In = void>
struct inclusive_scan {
  using value_t = T;
  using input_t = input_iterator_t<T, In>;
  using output_t = T*;
  using op_t = Op;
  using init_t = cub::NullType;
  using offset_t = unsigned int;
  using accum_t = ::cuda::std::__accumulator_t<Op, cub::detail::it_value_t<input_t>, cub::detail::it_value_t<input_t>>;
  using policy_hub = cub::detail::scan::policy_hub<cub::detail::it_value_t<input_t>, T, accum_t, offset_t, op_t>;
  using max_policy = typename policy_hub::MaxPolicy;
  using tile_state = cub::ScanTileState<accum_t>;
};

// cub::DeviceScan::ExclusiveSum: the kernels of kiln's own exclusive_scan_<T> units.
template <typename T>
using exclusive_sum = exclusive_scan<T, ::cuda::std::plus<>>;

}  // namespace kiln_prim
