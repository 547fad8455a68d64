// SegmentedReduce<T, Op>: CUB's DispatchSegmentedReduce on the registry's
// segmented_reduce_<op>_<T> kernels.
#include <kiln/prim/segmented_reduce.hpp>

#include <kiln/prim/segmented_reduce_plan.cuh>

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
namespace {

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
using Types = kiln_prim::segmented_reduce<detail::kernel_t<T>, typename OpTraits<Op>::op_t>;

// The offsets' type as DeviceSegmentedReduce derives it from int* begin/end offsets.
static_assert(std::is_same_v<Types<int, ReduceOp::sum>::offset_t,
                             cub::detail::common_iterator_value_t<const int*, const int*>>);
static_assert(std::is_same_v<Types<int, ReduceOp::sum>::offset_t,
                             cub::detail::common_iterator_value_t<int*, int*>>);
static_assert(std::is_same_v<std::int32_t, int>);

template <typename T, ReduceOp Op>
std::string spec() {
  return std::string("segmented_reduce_") + OpTraits<Op>::name + "_" + detail::type_suffix<T>();
}

// One CUB dispatch (detail::segments_dispatch, as SegmentedReduction<T, Op> runs it) with CUB's start value
// for the operator.
template <typename T, ReduceOp Op>
std::size_t dispatch(CUdevice device, const Kernel& segments, const detail::DeviceAnswers& answers, const T* in,
                     T* out, std::size_t num_segments, const std::int32_t* offsets, TempStorage temp,
                     CUstream stream) {
  using K = detail::kernel_t<T>;
  using Ty = Types<T, Op>;
  return detail::segments_dispatch<Ty>(device, segments, answers, reinterpret_cast<const K*>(in),
                                       reinterpret_cast<K*>(out), num_segments, offsets, typename Ty::op_t{},
                                       OpTraits<Op>::template init<K>(), temp, stream, spec<T, Op>());
}

}  // namespace

template <typename T, ReduceOp Op>
SegmentedReduce<T, Op>::SegmentedReduce(Registry& registry)
    : registry_(&registry), device_(detail::device_of(registry)), segments_(registry.get(spec<T, Op>() + "_segments")) {
  // The query DispatchSegmentedReduce::InvokePasses makes on every call, made once with the same arguments.
  detail::ContextScope scope(registry);
  const detail::DeviceAnswers answers = detail::segment_answers<Types<T, Op>>(device_, segments_, spec<T, Op>());
  threads_ = answers.block_threads;
  occupancy_ = answers.occupancy;
}

template <typename T, ReduceOp Op>
std::size_t SegmentedReduce<T, Op>::tile_items() const {
  return detail::segment_tiles<Types<T, Op>>(segments_).tile_items;
}

template <typename T, ReduceOp Op>
std::size_t SegmentedReduce<T, Op>::temp_bytes(std::size_t num_segments) const {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{0, segments_.launch_handle(), threads_, occupancy_};
  return dispatch<T, Op>(device_, segments_, answers, nullptr, nullptr, num_segments, nullptr, {}, nullptr);
}

template <typename T, ReduceOp Op>
void SegmentedReduce<T, Op>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{0, segments_.launch_handle(), threads_, occupancy_};
  detail::check_temp(temp, dispatch<T, Op>(device_, segments_, answers, in, out, num_segments, offsets, {}, stream),
                     "segmented_reduce");
  dispatch<T, Op>(device_, segments_, answers, in, out, num_segments, offsets, temp, stream);
}

template <typename T, ReduceOp Op>
void SegmentedReduce<T, Op>::operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                                        CUstream stream) {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{0, segments_.launch_handle(), threads_, occupancy_};
  const std::size_t bytes = dispatch<T, Op>(device_, segments_, answers, in, out, num_segments, offsets, {}, stream);
  dispatch<T, Op>(device_, segments_, answers, in, out, num_segments, offsets, workspace_.reserve(bytes), stream);
}

template <ReduceOp Op, typename T>
void segmented_reduce(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets, CUstream stream) {
  static const SegmentedReduce<T, Op> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(num_segments);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, num_segments, offsets, temp.storage(), stream);
}

template class SegmentedReduce<std::int32_t, ReduceOp::sum>;
template class SegmentedReduce<double, ReduceOp::sum>;
template class SegmentedReduce<double, ReduceOp::min>;
template class SegmentedReduce<double, ReduceOp::max>;
template void segmented_reduce<ReduceOp::sum>(const std::int32_t*, std::int32_t*, std::size_t, const std::int32_t*,
                                              CUstream);
template void segmented_reduce<ReduceOp::sum>(const double*, double*, std::size_t, const std::int32_t*, CUstream);
template void segmented_reduce<ReduceOp::min>(const double*, double*, std::size_t, const std::int32_t*, CUstream);
template void segmented_reduce<ReduceOp::max>(const double*, double*, std::size_t, const std::int32_t*, CUstream);

}  // namespace kiln::prim
