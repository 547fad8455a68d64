// ExclusiveSum<T>: CUB's DispatchScan on the registry's exclusive_scan_<T> kernels.
#include <kiln/prim/scan.hpp>

#include <kiln/prim/scan_plan.cuh>

#include "stream_temp.cuh"

#include <string>

namespace kiln::prim {
namespace {

template <typename T>
using Types = kiln_prim::exclusive_sum<detail::kernel_t<T>>;

template <typename T>
std::string spec() { return std::string("exclusive_scan_") + detail::type_suffix<T>(); }

// One CUB dispatch (detail::scan_dispatch, as ExclusiveScan<T, plus> runs it): sizes the storage when
// temp.data is null, runs otherwise.
template <typename T>
std::size_t dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, const T* in, T* out,
                     std::size_t n, TempStorage temp, CUstream stream) {
  using K = detail::kernel_t<T>;
  return detail::scan_dispatch<Types<T>>(device, init, sweep, reinterpret_cast<const K*>(in),
                                         reinterpret_cast<K*>(out), n, {}, typename Types<T>::init_t(K{}), temp,
                                         stream, spec<T>());
}

}  // namespace

template <typename T>
std::size_t ExclusiveSum<T>::tile_items() const {
  return detail::scan_tile_items<Types<T>>(sweep_);
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
