// SegmentedReduce<T, Op>: SegmentedReduction<T, Op's functor> (kiln/prim/segmented_reduce_plan.cuh) on the
// registry's segmented_reduce_<op>_<T> unit.
#include <kiln/prim/segmented_reduce.hpp>

#include <kiln/prim/segmented_reduce_plan.cuh>

#include "fixed_plan.cuh"
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <cub/detail/choose_offset.cuh>

#include <cuda/functional>
#include <cuda/std/functional>
#include <cuda/std/limits>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kiln::prim {

// The offsets' type as DeviceSegmentedReduce derives it from int* begin/end offsets.
using SegmentOffset = kiln_prim::segmented_reduce<int, ::cuda::std::plus<>>::offset_t;
static_assert(std::is_same_v<SegmentOffset, cub::detail::common_iterator_value_t<const int*, const int*>>);
static_assert(std::is_same_v<SegmentOffset, cub::detail::common_iterator_value_t<int*, int*>>);
static_assert(std::is_same_v<std::int32_t, int>);

namespace detail {

// What cub::DeviceSegmentedReduce::Sum/Min/Max pass for each operator (device_segmented_reduce.cuh): the
// functor and the start value of every segment.
template <ReduceOp Op>
struct OpTraits;
template <>
struct OpTraits<ReduceOp::sum> {
  using op_t = ::cuda::std::plus<>;
  static constexpr const char* name = "sum";
  template <typename T>
  static T init() { return T(); }  // "OutputT(), // zero-initialize"
};
template <>
struct OpTraits<ReduceOp::min> {
  using op_t = ::cuda::minimum<>;
  static constexpr const char* name = "min";
  template <typename T>
  static T init() { return ::cuda::std::numeric_limits<T>::max(); }
};
template <>
struct OpTraits<ReduceOp::max> {
  using op_t = ::cuda::maximum<>;
  static constexpr const char* name = "max";
  template <typename T>
  static T init() { return ::cuda::std::numeric_limits<T>::lowest(); }
};

template <typename T, ReduceOp Op>
struct SegmentedReducePlan : SegmentedReduction<kernel_t<T>, typename OpTraits<Op>::op_t> {
  using K = kernel_t<T>;
  explicit SegmentedReducePlan(Registry& registry)
      : SegmentedReduction<K, typename OpTraits<Op>::op_t>(
            registry, std::string("segmented_reduce_") + OpTraits<Op>::name + "_" + type_suffix<T>()) {}
};
}  // namespace detail

template <typename T, ReduceOp Op>
SegmentedReduce<T, Op>::SegmentedReduce(Registry& registry)
    : detail::FixedPlan<detail::SegmentedReducePlan<T, Op>>(registry) {}

// With CUB's start value for the operator.
template <typename T, ReduceOp Op>
void SegmentedReduce<T, Op>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        TempStorage temp, CUstream stream) const {
  using K = typename detail::SegmentedReducePlan<T, Op>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), num_segments, offsets,
               detail::OpTraits<Op>::template init<K>(), temp, stream);
}

template <typename T, ReduceOp Op>
void SegmentedReduce<T, Op>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        CUstream stream) {
  using K = typename detail::SegmentedReducePlan<T, Op>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), num_segments, offsets,
               detail::OpTraits<Op>::template init<K>(), stream);
}

template <ReduceOp Op, typename T>
void segmented_reduce(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets, CUstream stream) {
  static detail::OneShot<SegmentedReduce<T, Op>> plans;
  const int device = detail::one_shot_device(stream);
  const SegmentedReduce<T, Op>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(num_segments);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, num_segments, offsets, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_FIXED(T, Op) template class detail::FixedPlan<detail::SegmentedReducePlan<T, ReduceOp::Op>>;
#define KILN_PRIM_PLAN(T, Op) template class SegmentedReduce<T, ReduceOp::Op>;
#define KILN_PRIM_ONE_SHOT(T, Op) \
  template void segmented_reduce<ReduceOp::Op>(const T*, T*, std::size_t, const std::int32_t*, CUstream);
KILN_PRIM_SEGMENTED_REDUCE_TYPES(KILN_PRIM_FIXED)
KILN_PRIM_SEGMENTED_REDUCE_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_SEGMENTED_REDUCE_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_FIXED
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
