// Lets CUB's tuning headers compile under NVRTC, so kernels and host dispatch
// share CUB's own policy hubs (one set of tuning numbers for both, by construction).
//
// Every primitive unit includes this first. Under nvcc it only includes CUB's configuration. Under NVRTC,
// CCCL 3.0.1's util_device.cuh leaves out PolicyWrapper and MakePolicyWrapper, which tuning_scan.cuh,
// tuning_reduce.cuh, tuning_merge_sort.cuh and tuning_unique_by_key.cuh name in their host-side policy
// wrappers, and CUB_RUNTIME_FUNCTION means __host__, which NVRTC rejects. The wrappers are used by host
// dispatch only, so NVRTC needs their declarations, never their definitions.
#pragma once

#ifdef __CUDACC_RTC__
#  ifndef CUB_RUNTIME_FUNCTION
#    define CUB_RUNTIME_FUNCTION __device__
#  endif
#endif

#include <cub/config.cuh>
#include <cub/util_device.cuh>

#ifdef __CUDACC_RTC__
CUB_NAMESPACE_BEGIN
namespace detail {
template <typename PolicyT, typename = void>
struct PolicyWrapper : PolicyT {};
template <typename PolicyT>
__device__ PolicyWrapper<PolicyT> MakePolicyWrapper(PolicyT policy);
}  // namespace detail
CUB_NAMESPACE_END
#endif
