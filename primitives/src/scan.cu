// ExclusiveSum<T>: CUB's DispatchScan on the registry's exclusive_scan_<T> kernels.
#include <kiln/prim/scan.hpp>

#include "cub_launch.cuh"
#include "stream_temp.cuh"

#include <kiln_prim/scan.cuh>

#include <cub/device/dispatch/dispatch_scan.cuh>

#include <string>

namespace kiln::prim {
namespace {

template <typename T>
using Types = kiln_prim::exclusive_sum<detail::kernel_t<T>>;

template <typename T>
struct ScanSource {
  detail::KernelRef init, sweep;
  detail::KernelRef InitKernel() const { return init; }
  detail::KernelRef ScanKernel() const { return sweep; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types<T>::accum_t); }
  typename Types<T>::tile_state TileState() const { return {}; }
};

template <typename T>
using Dispatch = cub::DispatchScan<typename Types<T>::input_t, typename Types<T>::output_t, typename Types<T>::op_t,
                                   typename Types<T>::init_t, typename Types<T>::offset_t,
                                   typename Types<T>::accum_t, cub::ForceInclusive::No,
                                   typename Types<T>::policy_hub, ScanSource<T>, detail::LauncherFactory>;

template <typename T>
std::string spec() { return std::string("exclusive_scan_") + detail::type_suffix<T>(); }

// One CUB dispatch: sizes the storage when temp.data is null, runs otherwise.
template <typename T>
std::size_t dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, const T* in, T* out,
                     std::size_t n, TempStorage temp, CUstream stream) {
  using K = detail::kernel_t<T>;
  const auto count = detail::checked_count(n, "exclusive_sum");
  detail::LaunchStatus status;
  detail::LauncherFactory factory(device, sweep.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = Dispatch<T>::Dispatch(
      temp.data, bytes, reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), typename Types<T>::op_t{},
      typename Types<T>::init_t(K{}), count, stream, ScanSource<T>{detail::ref(init), detail::ref(sweep)}, factory,
      detail::RuntimePolicy<typename Types<T>::policy_hub::MaxPolicy>{});
  detail::check_dispatch(returned, status, spec<T>());
  return bytes;
}

// Reads a policy's tile the way DispatchScan does.
struct ScanTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    auto policy = cub::detail::scan::MakeScanPolicyWrapper(Policy{});
    items = std::size_t(policy.Scan().BlockThreads()) * std::size_t(policy.Scan().ItemsPerThread());
    return cudaSuccess;
  }
};

}  // namespace

template <typename T>
std::size_t ExclusiveSum<T>::tile_items() const {
  ScanTile tile;
  detail::RuntimePolicy<typename Types<T>::policy_hub::MaxPolicy>::Invoke(int(sweep_.provenance.arch) * 10, tile);
  return tile.items;
}

template <typename T>
ExclusiveSum<T>::ExclusiveSum(Registry& registry)
    : registry_(&registry), device_(detail::device_of(registry)), init_(registry.get(spec<T>() + "_init")), sweep_(registry.get(spec<T>() + "_sweep")) {}

template <typename T>
std::size_t ExclusiveSum<T>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  return dispatch<T>(device_, init_, sweep_, nullptr, nullptr, n, {}, nullptr);
}

template <typename T>
void ExclusiveSum<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  detail::check_temp(temp, dispatch<T>(device_, init_, sweep_, in, out, n, {}, stream), "exclusive_sum");
  dispatch<T>(device_, init_, sweep_, in, out, n, temp, stream);
}

template <typename T>
void ExclusiveSum<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const std::size_t bytes = dispatch<T>(device_, init_, sweep_, in, out, n, {}, stream);
  dispatch<T>(device_, init_, sweep_, in, out, n, workspace_.reserve(bytes), stream);
}

template <typename T>
void exclusive_sum(const T* in, T* out, std::size_t n, CUstream stream) {
  static const ExclusiveSum<T> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, n, temp.storage(), stream);
}

template class ExclusiveSum<std::int32_t>;
template class ExclusiveSum<std::int64_t>;
template void exclusive_sum(const std::int32_t*, std::int32_t*, std::size_t, CUstream);
template void exclusive_sum(const std::int64_t*, std::int64_t*, std::size_t, CUstream);

}  // namespace kiln::prim
