// SegmentedReduce<T, Op>: CUB's DispatchSegmentedReduce on the registry's
// segmented_reduce_<op>_<T> kernels.
#include <kiln/prim/segmented_reduce.hpp>

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/reduce_launch.cuh>
#include "stream_temp.cuh"

#include <kiln_prim/reduce.cuh>

#include <cub/detail/choose_offset.cuh>
#include <cub/device/dispatch/dispatch_reduce.cuh>

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

// DeviceSegmentedReduceKernelSource (dispatch_reduce.cuh) with the registry's kernel.
template <typename T, ReduceOp Op>
struct SegmentsSource {
  detail::KernelRef segments;
  detail::KernelRef SegmentedReduceKernel() const { return segments; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types<T, Op>::accum_t); }
};

template <typename T, ReduceOp Op>
using Dispatch = cub::DispatchSegmentedReduce<
    typename Types<T, Op>::input_t, typename Types<T, Op>::output_t, typename Types<T, Op>::begin_t,
    typename Types<T, Op>::end_t, typename Types<T, Op>::offset_t, typename Types<T, Op>::op_t,
    typename Types<T, Op>::init_t, typename Types<T, Op>::accum_t, typename Types<T, Op>::policy_hub,
    SegmentsSource<T, Op>, detail::AnsweredLauncherFactory>;

template <typename T, ReduceOp Op>
using Policy = detail::RuntimePolicy<typename Types<T, Op>::policy_hub::MaxPolicy>;

template <typename T, ReduceOp Op>
std::string spec() {
  return std::string("segmented_reduce_") + OpTraits<Op>::name + "_" + detail::type_suffix<T>();
}

// The segment policy's numbers, read the way DispatchSegmentedReduce reads them.
struct SegmentTiles {
  std::size_t tile_items = 0;
  int threads = 0;  // the block size of DeviceSegmentedReduceKernel
  template <typename ActivePolicy>
  cudaError_t Invoke() {
    auto policy = cub::detail::reduce::MakeReducePolicyWrapper(ActivePolicy{});
    threads = policy.SegmentedReduce().BlockThreads();
    tile_items = std::size_t(threads) * std::size_t(policy.SegmentedReduce().ItemsPerThread());
    return cudaSuccess;
  }
};

template <typename T, ReduceOp Op>
SegmentTiles tiles(const Kernel& kernel) {
  SegmentTiles tiles;
  Policy<T, Op>::Invoke(int(kernel.provenance.arch) * 10, tiles);
  return tiles;
}

// CUB takes the number of segments as int64_t (and launches at most 2^31 - 1 blocks per kernel, several
// kernels for more).
std::int64_t checked_segments(std::size_t num_segments) {
  if (num_segments > std::size_t(std::numeric_limits<std::int64_t>::max())) {
    throw std::length_error("kiln::prim::segmented_reduce: " + std::to_string(num_segments) +
                            " segments is more than the 2^63 - 1 CUB supports");
  }
  return static_cast<std::int64_t>(num_segments);
}

// One CUB dispatch: sizes the storage when temp.data is null, runs otherwise.
template <typename T, ReduceOp Op>
std::size_t dispatch(CUdevice device, const Kernel& segments, const detail::DeviceAnswers& answers, const T* in,
                     T* out, std::size_t num_segments, const std::int32_t* offsets, TempStorage temp,
                     CUstream stream) {
  using K = detail::kernel_t<T>;
  using Ty = Types<T, Op>;
  const std::int64_t count = checked_segments(num_segments);
  detail::LaunchStatus status;
  const detail::AnsweredLauncherFactory factory(detail::LauncherFactory(device, segments.provenance.arch, &status),
                                                answers);
  // With no segments CUB returns at once without setting the size: nothing is needed.
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = Dispatch<T, Op>::Dispatch(
      temp.data, bytes, reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), count, offsets,
      offsets == nullptr ? nullptr : offsets + 1, typename Ty::op_t{}, OpTraits<Op>::template init<K>(), stream,
      SegmentsSource<T, Op>{detail::ref(segments)}, factory, Policy<T, Op>{});
  detail::check_dispatch(returned, status, spec<T, Op>());
  return num_segments == 0 ? 0 : bytes;
}

}  // namespace

template <typename T, ReduceOp Op>
SegmentedReduce<T, Op>::SegmentedReduce(Registry& registry)
    : registry_(&registry), device_(detail::device_of(registry)), segments_(registry.get(spec<T, Op>() + "_segments")) {
  // The query DispatchSegmentedReduce::InvokePasses makes on every call, made once with the same arguments.
  detail::ContextScope scope(registry);
  detail::LaunchStatus status;
  const detail::LauncherFactory factory(device_, segments_.provenance.arch, &status);
  threads_ = tiles<T, Op>(segments_).threads;
  factory.MaxSmOccupancy(occupancy_, detail::ref(segments_), threads_);
  detail::check_dispatch(cudaSuccess, status, spec<T, Op>());
}

template <typename T, ReduceOp Op>
std::size_t SegmentedReduce<T, Op>::tile_items() const {
  return tiles<T, Op>(segments_).tile_items;
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
