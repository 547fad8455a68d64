// MergeSortPairs<K>: MergeSort<K, int, less> (kiln/prim/merge_sort_plan.cuh) on the registry's
// merge_sort_pairs_<K> unit.
#include <kiln/prim/merge_sort.hpp>

#include <kiln/prim/merge_sort_plan.cuh>

#include "fixed_plan.cuh"
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <cuda/std/functional>

#include <string>

namespace kiln::prim {

// The comparator of the merge_sort_pairs_<K> rows (templates/families/prim/merge_sort_pairs.toml).
namespace detail {
template <typename K>
struct MergeSortPairsPlan : MergeSort<kernel_t<K>, int, ::cuda::std::less<>> {
  using Key = kernel_t<K>;
  explicit MergeSortPairsPlan(Registry& registry)
      : MergeSort<Key, int, ::cuda::std::less<>>(registry,
                                                 std::string("merge_sort_pairs_") + type_suffix<K>()) {}
};
}  // namespace detail

template <typename K>
MergeSortPairs<K>::MergeSortPairs(Registry& registry) : detail::FixedPlan<detail::MergeSortPairsPlan<K>>(registry) {}

template <typename K>
void MergeSortPairs<K>::operator()(K* keys, value_type* values, std::size_t n, TempStorage temp,
                                   CUstream stream) const {
  this->open()(reinterpret_cast<typename detail::MergeSortPairsPlan<K>::Key*>(keys), values, n, temp, stream);
}

template <typename K>
void MergeSortPairs<K>::operator()(K* keys, value_type* values, std::size_t n, CUstream stream) {
  this->open()(reinterpret_cast<typename detail::MergeSortPairsPlan<K>::Key*>(keys), values, n, stream);
}

template <typename K>
void merge_sort_pairs(K* keys, std::int32_t* values, std::size_t n, CUstream stream) {
  static detail::OneShot<MergeSortPairs<K>> plans;
  const int device = detail::one_shot_device(stream);
  const MergeSortPairs<K>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(keys, values, n, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_FIXED(K) template class detail::FixedPlan<detail::MergeSortPairsPlan<K>>;
#define KILN_PRIM_PLAN(K) template class MergeSortPairs<K>;
#define KILN_PRIM_ONE_SHOT(K) template void merge_sort_pairs(K*, std::int32_t*, std::size_t, CUstream);
KILN_PRIM_MERGE_SORT_PAIRS_TYPES(KILN_PRIM_FIXED)
KILN_PRIM_MERGE_SORT_PAIRS_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_MERGE_SORT_PAIRS_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_FIXED
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
