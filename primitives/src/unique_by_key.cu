// UniqueByKey<K>: Unique<K, int, equal_to> (kiln/prim/unique_by_key_plan.cuh) on the registry's
// unique_by_key_<K> unit.
#include <kiln/prim/unique_by_key.hpp>

#include <kiln/prim/unique_by_key_plan.cuh>

#include "fixed_plan.cuh"
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <cuda/std/functional>

#include <string>

namespace kiln::prim {

namespace detail {
template <typename K>
struct UniqueByKeyPlan : Unique<kernel_t<K>, int, ::cuda::std::equal_to<>> {
  using Key = kernel_t<K>;
  using Count = typename Unique<Key, int, ::cuda::std::equal_to<>>::count_type;
  explicit UniqueByKeyPlan(Registry& registry)
      : Unique<Key, int, ::cuda::std::equal_to<>>(registry, std::string("unique_by_key_") + type_suffix<K>()) {}
};
}  // namespace detail

template <typename K>
UniqueByKey<K>::UniqueByKey(Registry& registry) : detail::FixedPlan<detail::UniqueByKeyPlan<K>>(registry) {}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, TempStorage temp, CUstream stream) const {
  using Key = typename detail::UniqueByKeyPlan<K>::Key;
  this->open()(reinterpret_cast<const Key*>(keys_in), values_in, reinterpret_cast<Key*>(keys_out), values_out,
               reinterpret_cast<typename detail::UniqueByKeyPlan<K>::Count*>(num_selected), n, temp, stream);
}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  using Key = typename detail::UniqueByKeyPlan<K>::Key;
  this->open()(reinterpret_cast<const Key*>(keys_in), values_in, reinterpret_cast<Key*>(keys_out), values_out,
               reinterpret_cast<typename detail::UniqueByKeyPlan<K>::Count*>(num_selected), n, stream);
}

template <typename K>
void unique_by_key(const K* keys_in, const std::int32_t* values_in, K* keys_out, std::int32_t* values_out,
                   std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  static detail::OneShot<UniqueByKey<K>> plans;
  const int device = detail::one_shot_device(stream);
  const UniqueByKey<K>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(keys_in, values_in, keys_out, values_out, num_selected, n, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_FIXED(K) template class detail::FixedPlan<detail::UniqueByKeyPlan<K>>;
#define KILN_PRIM_PLAN(K) template class UniqueByKey<K>;
#define KILN_PRIM_ONE_SHOT(K) \
  template void unique_by_key(const K*, const std::int32_t*, K*, std::int32_t*, std::uint64_t*, std::size_t, CUstream);
KILN_PRIM_UNIQUE_BY_KEY_TYPES(KILN_PRIM_FIXED)
KILN_PRIM_UNIQUE_BY_KEY_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_UNIQUE_BY_KEY_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_FIXED
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
