// ReduceSum<T>: CUB's DispatchReduce on the registry's reduce_<T> kernels.
#include <kiln/prim/reduce.hpp>

#include <kiln/prim/reduce_plan.cuh>

#include "stream_temp.cuh"

#include <cub/detail/choose_offset.cuh>

#include <string>
#include <type_traits>

namespace kiln::prim {
namespace {

template <typename T>
using Types = kiln_prim::reduce_sum<detail::kernel_t<T>>;

// cub::DeviceReduce::Sum with an int item count, whose offset type kiln's 32-bit counts mirror.
static_assert(std::is_same_v<Types<int>::offset_t, cub::detail::choose_offset_t<int>>);
static_assert(std::is_same_v<Types<int>::offset_t, std::uint32_t>);

template <typename T>
std::string spec() { return std::string("reduce_") + detail::type_suffix<T>(); }

// One CUB dispatch (detail::reduce_dispatch, as Reduce<T, plus> runs it) as cub::DeviceReduce::Sum: plus,
// a zero-initialised start value, no transform. Sizes the storage when temp.data is null, runs otherwise.
template <typename T>
std::size_t dispatch(CUdevice device, const detail::ReduceKernels& kernels, const T* in, T* out, std::size_t n,
                     TempStorage temp, CUstream stream) {
  using K = detail::kernel_t<T>;
  return detail::reduce_dispatch<Types<T>>(device, kernels, reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out),
                                           n, {}, typename Types<T>::init_t{}, temp, stream, spec<T>());
}

}  // namespace

template <typename T>
ReduceSum<T>::ReduceSum(Registry& registry) : registry_(&registry), device_(detail::device_of(registry)) {
  const detail::ReduceKernels k = detail::reduce_kernels<Types<T>>(registry, device_, spec<T>());
  single_tile_ = k.single_tile, sweep_ = k.sweep, final_ = k.final_pass;
  sm_count_ = k.answers.sm_count, sweep_threads_ = k.answers.block_threads, sweep_occupancy_ = k.answers.occupancy;
}

template <typename T>
std::size_t ReduceSum<T>::tile_items() const {
  return detail::reduce_tiles<Types<T>>(sweep_).single_tile_items;
}

template <typename T>
detail::ReduceKernels ReduceSum<T>::kernels() const {
  return {single_tile_, sweep_, final_, {sm_count_, sweep_.launch_handle(), sweep_threads_, sweep_occupancy_}};
}

template <typename T>
std::size_t ReduceSum<T>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  return dispatch<T>(device_, kernels(), nullptr, nullptr, n, {}, nullptr);
}

template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const detail::ReduceKernels k = kernels();
  detail::check_temp(temp, dispatch<T>(device_, k, in, out, n, {}, stream), "reduce_sum");
  dispatch<T>(device_, k, in, out, n, temp, stream);
}

template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const detail::ReduceKernels k = kernels();
  const std::size_t bytes = dispatch<T>(device_, k, in, out, n, {}, stream);
  dispatch<T>(device_, k, in, out, n, workspace_.reserve(bytes), stream);
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
