// Radix sort of key/value pairs: the types kiln's radix sort kernels are
// instantiated with, shared by the kernel units (templates/families/prim/radix_sort_pairs.toml) and the
// host orchestration (primitives/src/radix_sort.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>

#include <cub/device/dispatch/kernels/radix_sort.cuh>
#include <cub/device/dispatch/tuning/tuning_radix_sort.cuh>

namespace kiln_prim {

// cub::DeviceRadixSort::SortPairs over K keys and int values with int item counts, ascending, spelled
// out: choose_offset_t<int> is unsigned int (cub/detail/choose_offset.cuh), and DispatchRadixSort's
// InvokeOnesweep counts within a portion, and atomically, in int (dispatch_radix_sort.cuh).
template <typename K>
struct radix_sort_pairs {
  using key_t = K;
  using value_t = int;
  using offset_t = unsigned int;
  using portion_offset_t = int;
  using atomic_offset_t = int;
  using decomposer_t = cub::detail::identity_decomposer_t;
  static constexpr cub::SortOrder order = cub::SortOrder::Ascending;
  using policy_hub = cub::detail::radix::policy_hub<key_t, value_t, offset_t>;
  using max_policy = typename policy_hub::MaxPolicy;
};

}  // namespace kiln_prim
