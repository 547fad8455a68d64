// SegmentedReduction<T, Op, In>: CUB's DispatchSegmentedReduce on the kernel of a kiln.segmented_reduce row of
// any registry. Header-only; include it from a .cu file nvcc compiles (CUB's host dispatch does not compile
// with g++), with kiln's primitive headers on the include path (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/detail/reduce_launch.cuh>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/reduce.cuh>

#include <cub/device/dispatch/dispatch_reduce.cuh>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiln::prim {
namespace detail {

// DeviceSegmentedReduceKernelSource (dispatch_reduce.cuh) with the registry's kernel.
template <typename Types>
struct SegmentsSource {
  KernelRef segments;
  KernelRef SegmentedReduceKernel() const { return segments; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types::accum_t); }
};

template <typename Types>
using SegmentsDispatch =
    cub::DispatchSegmentedReduce<typename Types::input_t, typename Types::output_t, typename Types::begin_t,
                                 typename Types::end_t, typename Types::offset_t, typename Types::op_t,
                                 typename Types::init_t, typename Types::accum_t, typename Types::policy_hub,
                                 SegmentsSource<Types>, AnsweredLauncherFactory>;

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

template <typename Types>
SegmentTiles segment_tiles(const Kernel& kernel) {
  SegmentTiles tiles;
  RuntimePolicy<typename Types::max_policy>::Invoke(int(kernel.provenance.arch) * 10, tiles);
  return tiles;
}

// The one query DispatchSegmentedReduce::InvokePasses makes on every call (the kernel's occupancy at its
// block size), asked once when a plan is built.
template <typename Types>
DeviceAnswers segment_answers(CUdevice device, const Kernel& segments, const std::string& name) {
  LaunchStatus status;
  const LauncherFactory factory(device, segments.provenance.arch, &status);
  DeviceAnswers answers{0, segments.launch_handle(), segment_tiles<Types>(segments).threads, 0};
  factory.MaxSmOccupancy(answers.occupancy, ref(segments), answers.block_threads);
  check_dispatch(cudaSuccess, status, name);
  return answers;
}

// CUB takes the number of segments as int64_t (and launches at most 2^31 - 1 blocks per kernel, several
// kernels for more).
inline std::int64_t checked_segments(std::size_t num_segments, const std::string& name) {
  if (num_segments > std::size_t(std::numeric_limits<std::int64_t>::max())) {
    throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + name + ": " + std::to_string(num_segments) +
                            " segments is more than the 2^63 - 1 CUB supports");
  }
  return static_cast<std::int64_t>(num_segments);
}

// One CUB dispatch with int32 offsets (begin = offsets, end = offsets + 1): sizes the storage when temp.data
// is null, runs otherwise. `name` names the unit in errors.
template <typename Types>
std::size_t segments_dispatch(CUdevice device, const Kernel& segments, const DeviceAnswers& answers,
                              typename Types::input_t in, typename Types::output_t out, std::size_t num_segments,
                              const std::int32_t* offsets, typename Types::op_t op, typename Types::init_t init,
                              TempStorage temp, CUstream stream, const std::string& name) {
  const std::int64_t count = checked_segments(num_segments, name);
  LaunchStatus status;
  const AnsweredLauncherFactory factory(LauncherFactory(device, segments.provenance.arch, &status), answers);
  // With no segments CUB returns at once without setting the size: nothing is needed.
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = SegmentsDispatch<Types>::Dispatch(
      temp.data, bytes, in, out, count, offsets, offsets == nullptr ? nullptr : offsets + 1, op, init, stream,
      SegmentsSource<Types>{ref(segments)}, factory, RuntimePolicy<typename Types::max_policy>{});
  check_dispatch(returned, status, name);
  return num_segments == 0 ? 0 : bytes;
}

}  // namespace detail

// For i < num_segments: out[i] = op(init, in[offsets[i]], …, in[offsets[i+1] - 1]) in CUB's order, one thread
// block per segment (cub::DeviceSegmentedReduce::Reduce). `offsets` holds num_segments + 1 non-decreasing
// int32 offsets into `in`; an empty segment gets init. The registry's unit must be a kiln.segmented_reduce
// row with params T, Op and In naming these same types. In: the values' input iterator
// (kiln_prim/iterators.cuh), void for const T*.
template <typename T, typename Op, typename In = void>
class SegmentedReduction : detail::PlanBase {
  using Types = kiln_prim::segmented_reduce<T, Op, In>;

 public:
  using input_type = typename Types::input_t;  // const T*, or In

  // `link`: the unit is a linked row, and this is the operator linked into it (kiln/prim/operator.hpp).
  SegmentedReduction(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        segments_(detail::get_kernel(registry, unit_ + "_segments", link)),
        answers_(answers(registry)) {}

  // Temporary storage a call with num_segments segments needs.
  std::size_t temp_bytes(std::size_t num_segments) const {
    return sized(dispatch(input_type{}, nullptr, num_segments, nullptr, {}, T{}, nullptr));
  }

  // Thread-safe: a plan's const calls only read it. `out` has num_segments elements, not part of `in`.
  void operator()(input_type in, T* out, std::size_t num_segments, const std::int32_t* offsets, T init,
                  TempStorage temp, CUstream stream = nullptr, Op op = {}) const {
    run(temp, dispatch(in, out, num_segments, offsets, op, init, stream));
  }
  // With storage the plan owns (allocated only when it outgrows it).
  void operator()(input_type in, T* out, std::size_t num_segments, const std::int32_t* offsets, T init,
                  CUstream stream = nullptr, Op op = {}) {
    run(dispatch(in, out, num_segments, offsets, op, init, stream));
  }

  // Items per tile of the segment kernel: a longer segment is reduced in several tiles by its block.
  std::size_t tile_items() const { return detail::segment_tiles<Types>(segments_).tile_items; }

  // Where the kernel came from (embedded, disk, JIT) and the arch of its binary.
  const Kernel& kernel() const { return segments_; }

 private:
  detail::DeviceAnswers answers(Registry& registry) const {
    detail::ContextScope scope(registry);
    return detail::segment_answers<Types>(device_, segments_, unit_);
  }

  // The dispatch of one call, for PlanBase::run.
  auto dispatch(input_type in, T* out, std::size_t num_segments, const std::int32_t* offsets, Op op, T init,
                CUstream stream) const {
    return [=, this](TempStorage temp) {
      return detail::segments_dispatch<Types>(device_, segments_, answers_, in, out, num_segments, offsets, op, init,
                                              temp, stream, unit_);
    };
  }

  Kernel segments_;
  detail::DeviceAnswers answers_;
};

}  // namespace kiln::prim
