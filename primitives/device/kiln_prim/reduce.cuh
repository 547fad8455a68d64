// Reduction and segmented reduction: the types kiln's reduce kernels are instantiated with,
// shared by the kernel units (families kiln.reduce, kiln.segmented_reduce and their prim.* instances)
// and the host dispatch (kiln/prim/reduce_plan.cuh, primitives/src/segmented_reduce.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>
#include <kiln_prim/iterators.cuh>

#include <cub/device/dispatch/kernels/reduce.cuh>
#include <cub/device/dispatch/kernels/segmented_reduce.cuh>
#include <cub/device/dispatch/tuning/tuning_reduce.cuh>

#include <cuda/functional>
#include <cuda/std/functional>
#include <cuda/std/type_traits>

namespace kiln_prim {

// cub::DeviceReduce::Reduce(temp, bytes, const T*, T*, int num_items, Op, InitT init) spelled out
// (device_reduce.cuh): OffsetT = choose_offset_t<int> (unsigned 32-bit), AccumT and PolicyHub as
// DispatchReduce's defaults, no transform. DeviceReduceKernelSource (dispatch_reduce.cuh) names three
// kernels: the single-tile kernel for small inputs, the per-block reduction kernel, and the single-tile
// kernel again over the per-block partials with `int` item counts. In: the input iterator, void for const T*
// (kiln_prim/iterators.cuh for lazy ones); its values are what Op combines, as DispatchReduce's AccumT says.
template <typename T, typename Op, typename In = void, typename InitT = T>
struct reduce {
  using value_t = T;
  using input_t = input_iterator_t<T, In>;
  using output_t = T*;
  using offset_t = unsigned int;
  using op_t = Op;
  using init_t = InitT;
  using accum_t = ::cuda::std::__accumulator_t<Op, cub::detail::it_value_t<input_t>, InitT>;
  using transform_t = ::cuda::std::__identity;
  using policy_hub = cub::detail::reduce::policy_hub<accum_t, offset_t, op_t>;
  using max_policy = typename policy_hub::MaxPolicy;
  using partials_t = accum_t*;    // SingleTileSecondKernel's input: the per-block partials
  using partials_offset_t = int;  // "Always used with int offsets" (DeviceReduceKernelSource)
};

// cub::DeviceReduce::Sum: plus, with the output's value type zero-initialised as the start value. The
// kernels of kiln's own reduce_<T> units.
template <typename T>
using reduce_sum = reduce<T, ::cuda::std::plus<>>;

// cub::DeviceSegmentedReduce::Reduce/Sum/Min/Max(temp, bytes, const T*, T*, num_segments, const int* begin,
// const int* end) spelled out (device_segmented_reduce.cuh): OffsetT = the offsets' value type (int),
// InitT = T (DispatchSegmentedReduce's default), AccumT and PolicyHub as its defaults. kiln's own units take
// Op ::cuda::std::plus<> (init T{}), ::cuda::minimum<> (init numeric_limits<T>::max()) or ::cuda::maximum<>
// (init numeric_limits<T>::lowest()). One kernel: one thread block per segment. In: the values' input
// iterator, void for const T* (kiln_prim/iterators.cuh for lazy ones), yielding T.
template <typename T, typename Op, typename In = void>
struct segmented_reduce {
  using value_t = T;
  using input_t = input_iterator_t<T, In>;
  using output_t = T*;
  using begin_t = const int*;
  using end_t = const int*;
  using offset_t = int;
  using op_t = Op;
  using init_t = T;
  using accum_t = T;
  using policy_hub = cub::detail::reduce::policy_hub<accum_t, offset_t, op_t>;
  using max_policy = typename policy_hub::MaxPolicy;

  static_assert(::cuda::std::is_same_v<accum_t, ::cuda::std::__accumulator_t<op_t, cub::detail::it_value_t<input_t>, init_t>>,
                "DispatchSegmentedReduce's default AccumT: an In that yields T");
};

}  // namespace kiln_prim
