// Device-wide stable merge sort of key/value pairs
// (cub::DeviceMergeSort::SortPairs) through kiln's registry. Specs: merge_sort_pairs_<K> (u64, …).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

namespace detail {
template <typename K>
struct MergeSortPairsPlan;  // MergeSort<K, int, less> on the unit merge_sort_pairs_<K> (primitives/src/merge_sort.cu)
}  // namespace detail

// Sorts keys[0, n) ascending by `<` (the spec's comparator, ::cuda::std::less<>) in place and moves
// values[i] with keys[i]. Stable: pairs with equal keys keep their input order. (CUB documents SortPairs as
// not guaranteed stable but runs the same dispatch for StableSortPairs; kiln's tests check stability.)
template <typename K>  // a type of KILN_PRIM_MERGE_SORT_PAIRS_TYPES
class MergeSortPairs : public detail::FixedPlan<detail::MergeSortPairsPlan<K>> {
 public:
  using value_type = std::int32_t;

  explicit MergeSortPairs(Registry& registry = prim::registry());

  // Thread-safe: a plan's const calls only read it.
  void operator()(K* keys, value_type* values, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(K* keys, value_type* values, std::size_t n, CUstream stream = nullptr);

  // From detail::FixedPlan: temp_bytes(n), the temporary storage a call with n items needs (0 for n == 0);
  // tile_items(), the items per tile of the block-sort and merge kernels under the policy for the loaded binary's
  // architecture; kernel(), where the kernels came from (embedded, disk, JIT) and the arch of their binary.
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(K) extern template class MergeSortPairs<K>;
KILN_PRIM_MERGE_SORT_PAIRS_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename K>
void merge_sort_pairs(K* keys, std::int32_t* values, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
