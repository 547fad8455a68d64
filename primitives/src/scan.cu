// ExclusiveSum<T>: ExclusiveScan<T, plus> (kiln/prim/scan_plan.cuh) on the registry's exclusive_scan_<T> unit.
#include <kiln/prim/scan.hpp>

#include <kiln/prim/scan_plan.cuh>

#include "fixed_plan.cuh"
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <cuda/std/functional>

#include <string>

namespace kiln::prim {

namespace detail {
template <typename T>
struct ExclusiveSumPlan : ExclusiveScan<kernel_t<T>, ::cuda::std::plus<>> {
  using K = kernel_t<T>;
  explicit ExclusiveSumPlan(Registry& registry)
      : ExclusiveScan<K, ::cuda::std::plus<>>(registry, std::string("exclusive_scan_") + type_suffix<T>()) {}
};
}  // namespace detail

template <typename T>
ExclusiveSum<T>::ExclusiveSum(Registry& registry) : detail::FixedPlan<detail::ExclusiveSumPlan<T>>(registry) {}

// cub::DeviceScan::ExclusiveSum: plus, with a zero-initialised start value.
template <typename T>
void ExclusiveSum<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  using K = typename detail::ExclusiveSumPlan<T>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), n, K{}, temp, stream);
}

template <typename T>
void ExclusiveSum<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  using K = typename detail::ExclusiveSumPlan<T>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), n, K{}, stream);
}

template <typename T>
void exclusive_sum(const T* in, T* out, std::size_t n, CUstream stream) {
  static detail::OneShot<ExclusiveSum<T>> plans;
  const int device = detail::one_shot_device(stream);
  const ExclusiveSum<T>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, n, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_FIXED(T) template class detail::FixedPlan<detail::ExclusiveSumPlan<T>>;
#define KILN_PRIM_PLAN(T) template class ExclusiveSum<T>;
#define KILN_PRIM_ONE_SHOT(T) template void exclusive_sum(const T*, T*, std::size_t, CUstream);
KILN_PRIM_EXCLUSIVE_SUM_TYPES(KILN_PRIM_FIXED)
KILN_PRIM_EXCLUSIVE_SUM_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_EXCLUSIVE_SUM_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_FIXED
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
