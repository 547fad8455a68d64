// ReduceSum<T>: CUB's DispatchReduce on the registry's reduce_<T> kernels.
#include <kiln/prim/reduce.hpp>

#include "cub_launch.cuh"
#include "reduce_launch.cuh"
#include "stream_temp.cuh"

#include <kiln_prim/reduce.cuh>

#include <cub/detail/choose_offset.cuh>
#include <cub/device/dispatch/dispatch_reduce.cuh>

#include <string>
#include <type_traits>

namespace kiln::prim {
namespace {

template <typename T>
using Types = kiln_prim::reduce_sum<detail::kernel_t<T>>;

// cub::DeviceReduce::Sum with an int item count, whose offset type kiln's 32-bit counts mirror.
static_assert(std::is_same_v<Types<int>::offset_t, cub::detail::choose_offset_t<int>>);
static_assert(std::is_same_v<Types<int>::offset_t, std::uint32_t>);

// DeviceReduceKernelSource (dispatch_reduce.cuh) with the registry's kernels.
template <typename T>
struct ReduceSource {
  detail::KernelRef single_tile, sweep, final_pass;
  detail::KernelRef SingleTileKernel() const { return single_tile; }
  detail::KernelRef ReductionKernel() const { return sweep; }
  detail::KernelRef SingleTileSecondKernel() const { return final_pass; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types<T>::accum_t); }
};

template <typename T>
using Dispatch = cub::DispatchReduce<typename Types<T>::input_t, typename Types<T>::output_t,
                                     typename Types<T>::offset_t, typename Types<T>::op_t, typename Types<T>::init_t,
                                     typename Types<T>::accum_t, typename Types<T>::transform_t,
                                     typename Types<T>::policy_hub, ReduceSource<T>, detail::AnsweredLauncherFactory>;

template <typename T>
using Policy = detail::RuntimePolicy<typename Types<T>::policy_hub::MaxPolicy>;

template <typename T>
std::string spec() { return std::string("reduce_") + detail::type_suffix<T>(); }

// A policy's numbers, read the way DispatchReduce reads them (through MakeReducePolicyWrapper).
struct ReduceTiles {
  std::size_t single_tile_items = 0;  // DispatchReduce::Invoke: at most this many take the single-tile kernel
  int sweep_threads = 0;              // InvokePasses: DeviceReduceKernel's block size
  template <typename ActivePolicy>
  cudaError_t Invoke() {
    auto policy = cub::detail::reduce::MakeReducePolicyWrapper(ActivePolicy{});
    single_tile_items = std::size_t(policy.SingleTile().BlockThreads()) * std::size_t(policy.SingleTile().ItemsPerThread());
    sweep_threads = policy.Reduce().BlockThreads();
    return cudaSuccess;
  }
};

template <typename T>
ReduceTiles tiles(const Kernel& sweep) {
  ReduceTiles tiles;
  Policy<T>::Invoke(int(sweep.provenance.arch) * 10, tiles);
  return tiles;
}

// One CUB dispatch: sizes the storage when temp.data is null, runs otherwise.
template <typename T>
std::size_t dispatch(CUdevice device, const Kernel& single_tile, const Kernel& sweep, const Kernel& final_pass,
                     const detail::DeviceAnswers& answers, const T* in, T* out, std::size_t n, TempStorage temp,
                     CUstream stream) {
  using K = detail::kernel_t<T>;
  using Ty = Types<T>;
  const auto count = detail::checked_count(n, "reduce_sum");
  detail::LaunchStatus status;
  const detail::AnsweredLauncherFactory factory(detail::LauncherFactory(device, sweep.provenance.arch, &status),
                                                answers);
  std::size_t bytes = temp.bytes;
  // As cub::DeviceReduce::Sum: plus, a zero-initialised start value, no transform.
  const cudaError_t returned = Dispatch<T>::Dispatch(
      temp.data, bytes, reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), count, typename Ty::op_t{},
      typename Ty::init_t{}, stream, typename Ty::transform_t{},
      ReduceSource<T>{detail::ref(single_tile), detail::ref(sweep), detail::ref(final_pass)}, factory, Policy<T>{});
  detail::check_dispatch(returned, status, spec<T>());
  return bytes;
}

}  // namespace

template <typename T>
ReduceSum<T>::ReduceSum(Registry& registry)
    : registry_(&registry),
      device_(detail::device_of(registry)),
      single_tile_(registry.get(spec<T>() + "_single_tile")),
      sweep_(registry.get(spec<T>() + "_sweep")),
      final_(registry.get(spec<T>() + "_final")) {
  // The two queries DispatchReduce::InvokePasses makes on every call, made once with the same arguments.
  detail::ContextScope scope(registry);
  detail::LaunchStatus status;
  const detail::LauncherFactory factory(device_, sweep_.provenance.arch, &status);
  sweep_threads_ = tiles<T>(sweep_).sweep_threads;
  factory.MultiProcessorCount(sm_count_);
  factory.MaxSmOccupancy(sweep_occupancy_, detail::ref(sweep_), sweep_threads_);
  detail::check_dispatch(cudaSuccess, status, spec<T>());
}

template <typename T>
std::size_t ReduceSum<T>::tile_items() const {
  return tiles<T>(sweep_).single_tile_items;
}

template <typename T>
std::size_t ReduceSum<T>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{sm_count_, sweep_.launch_handle(), sweep_threads_, sweep_occupancy_};
  return dispatch<T>(device_, single_tile_, sweep_, final_, answers, nullptr, nullptr, n, {}, nullptr);
}

template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{sm_count_, sweep_.launch_handle(), sweep_threads_, sweep_occupancy_};
  detail::check_temp(temp, dispatch<T>(device_, single_tile_, sweep_, final_, answers, in, out, n, {}, stream),
                     "reduce_sum");
  dispatch<T>(device_, single_tile_, sweep_, final_, answers, in, out, n, temp, stream);
}

template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const detail::DeviceAnswers answers{sm_count_, sweep_.launch_handle(), sweep_threads_, sweep_occupancy_};
  const std::size_t bytes = dispatch<T>(device_, single_tile_, sweep_, final_, answers, in, out, n, {}, stream);
  dispatch<T>(device_, single_tile_, sweep_, final_, answers, in, out, n, workspace_.reserve(bytes), stream);
}

template <typename T>
void reduce_sum(const T* in, T* out, std::size_t n, CUstream stream) {
  static const ReduceSum<T> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, n, temp.storage(), stream);
}

template class ReduceSum<std::int32_t>;
template class ReduceSum<double>;
template void reduce_sum(const std::int32_t*, std::int32_t*, std::size_t, CUstream);
template void reduce_sum(const double*, double*, std::size_t, CUstream);

}  // namespace kiln::prim
