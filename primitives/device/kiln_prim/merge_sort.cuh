// Merge sort of key/value pairs: the types kiln's merge sort kernels are
// instantiated with, shared by the kernel units (family kiln.merge_sort_pairs) and the
// host dispatch (primitives/src/merge_sort.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>
#include <kiln_prim/iterators.cuh>

// CUB's merge sort agents wait on their predecessor through programmatic dependent launch on sm_90
// (cudaGridDependencySynchronize, cudaTriggerProgrammaticLaunchCompletion). nvcc declares both through
// cuda_runtime.h; NVRTC has no implicit runtime header, and these two are static inline in this one.
#ifdef __CUDACC_RTC__
#  include <cuda_device_runtime_api.h>
#endif

#include <cub/device/dispatch/kernels/merge_sort.cuh>
#include <cub/device/dispatch/tuning/tuning_merge_sort.cuh>

#include <cuda/std/functional>
#include <cuda/std/type_traits>

namespace kiln_prim {

// cub::DeviceMergeSort::SortPairs(temp, bytes, K* keys, V* values, int n, Compare) spelled out: keys and
// values sorted in place (input and output iterators are the same pointers), 32-bit offsets
// (cub::detail::choose_offset_t<int>), CUB's default policy hub for K*. With KeysIn or ValuesIn given it is
// cub::DeviceMergeSort::SortPairsCopy(temp, bytes, KeysIn, ValuesIn, K*, V*, int n, Compare) instead: the
// input is read through those iterators (void for const K* or const V*; kiln_prim/iterators.cuh for lazy
// ones, e.g. counting_iterator<int> values for an argsort) and the output is written apart from it.
template <typename K, typename V, typename Compare, typename KeysIn = void, typename ValuesIn = void>
struct merge_sort_pairs {
  using key_t = K;
  using value_t = V;
  static constexpr bool copy = !::cuda::std::is_void_v<KeysIn> || !::cuda::std::is_void_v<ValuesIn>;
  using key_input_t = ::cuda::std::conditional_t<copy, input_iterator_t<K, KeysIn>, K*>;
  using value_input_t = ::cuda::std::conditional_t<copy, input_iterator_t<V, ValuesIn>, V*>;
  using key_iterator_t = K*;
  using value_iterator_t = V*;
  using offset_t = unsigned int;
  using compare_t = Compare;
  using policy_hub = cub::detail::merge_sort::policy_hub<key_iterator_t>;
  using max_policy = typename policy_hub::MaxPolicy;
};

}  // namespace kiln_prim
