// Vectorised binary search (lower_bound, upper_bound of many needles in one sorted
// haystack): the types kiln's search kernels are instantiated with, shared by the kernel units
// (templates/families/prim/search.toml), the host dispatch (primitives/src/search.cu) and the benchmark's
// nvcc-compiled baseline (bench/prim_bench_search.cu).
//
// CCCL 3.0.1 has no device-wide binary search. kiln runs one per needle through CUB's for-each machinery:
// cub::DeviceFor::Bulk(num_needles, search_op) would launch cub::detail::for_each::static_kernel with
// CUB's for-each policy hub; the op is cub::LowerBound / cub::UpperBound (cub/thread/thread_search.cuh),
// which compare with operator< only.
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>

#include <cub/device/dispatch/kernels/for_each.cuh>
#include <cub/device/dispatch/tuning/tuning_for.cuh>
#include <cub/thread/thread_search.cuh>

namespace kiln_prim {

// out[i] = the first position in haystack[0, haystack_size) where needles[i] could be inserted keeping the
// order: before the first element not less than it (lower), or before the first element greater than it
// (upper). Positions are 64-bit, like numpy/CuPy's searchsorted.
template <typename T, bool Upper>
struct search_op {
  const T* haystack;
  unsigned int haystack_size;
  const T* needles;
  long long* out;

  __device__ __forceinline__ void operator()(unsigned int i) const {
    const T needle = needles[i];
    const unsigned int position = Upper ? cub::UpperBound(haystack, haystack_size, needle)
                                        : cub::LowerBound(haystack, haystack_size, needle);
    out[i] = static_cast<long long>(position);
  }
};

// cub::DeviceFor::Bulk(unsigned int num_needles, search_op<T, Upper>), spelled out.
template <typename T, bool Upper>
struct binary_search {
  using value_t = T;
  using offset_t = unsigned int;  // Bulk's ShapeT: the needle count
  using op_t = search_op<T, Upper>;
  using policy_hub = cub::detail::for_each::policy_hub_t;
  using max_policy = typename policy_hub::MaxPolicy;
};

template <typename T>
using lower_bound = binary_search<T, false>;
template <typename T>
using upper_bound = binary_search<T, true>;

}  // namespace kiln_prim
