// ReduceSum<T>: Reduce<T, plus> (kiln/prim/reduce_plan.cuh) on the registry's reduce_<T> unit.
#include <kiln/prim/reduce.hpp>

#include <kiln/prim/reduce_plan.cuh>

#include "fixed_plan.cuh"
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <cub/detail/choose_offset.cuh>

#include <cuda/std/functional>

#include <string>
#include <type_traits>

namespace kiln::prim {

// cub::DeviceReduce::Sum with an int item count, whose offset type kiln's 32-bit counts mirror.
static_assert(std::is_same_v<kiln_prim::reduce_sum<int>::offset_t, cub::detail::choose_offset_t<int>>);
static_assert(std::is_same_v<kiln_prim::reduce_sum<int>::offset_t, std::uint32_t>);

namespace detail {
template <typename T>
struct ReduceSumPlan : Reduce<kernel_t<T>, ::cuda::std::plus<>> {
  using K = kernel_t<T>;
  explicit ReduceSumPlan(Registry& registry)
      : Reduce<K, ::cuda::std::plus<>>(registry, std::string("reduce_") + type_suffix<T>()) {}
};
}  // namespace detail

template <typename T>
ReduceSum<T>::ReduceSum(Registry& registry) : detail::FixedPlan<detail::ReduceSumPlan<T>>(registry) {}

// cub::DeviceReduce::Sum: plus, a zero-initialised start value, no transform.
template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream) const {
  using K = typename detail::ReduceSumPlan<T>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), n, K{}, temp, stream);
}

template <typename T>
void ReduceSum<T>::operator()(const T* in, T* out, std::size_t n, CUstream stream) {
  using K = typename detail::ReduceSumPlan<T>::K;
  this->open()(reinterpret_cast<const K*>(in), reinterpret_cast<K*>(out), n, K{}, stream);
}

template <typename T>
void reduce_sum(const T* in, T* out, std::size_t n, CUstream stream) {
  static detail::OneShot<ReduceSum<T>> plans;
  const int device = detail::one_shot_device(stream);
  const ReduceSum<T>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(in, out, n, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_FIXED(T) template class detail::FixedPlan<detail::ReduceSumPlan<T>>;
#define KILN_PRIM_PLAN(T) template class ReduceSum<T>;
#define KILN_PRIM_ONE_SHOT(T) template void reduce_sum(const T*, T*, std::size_t, CUstream);
KILN_PRIM_REDUCE_SUM_TYPES(KILN_PRIM_FIXED)
KILN_PRIM_REDUCE_SUM_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_REDUCE_SUM_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_FIXED
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
