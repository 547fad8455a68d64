// Transform: the types the kernel of cub::DeviceTransform::Transform(in, out, n, op) is instantiated with
// for one input, shared by the kernel units (templates/families/kiln/transform.cu.j2) and the host
// dispatch (kiln/prim/transform_plan.cuh).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>
#include <kiln_prim/iterators.cuh>

#include <cub/device/dispatch/kernels/transform.cuh>
#include <cub/device/dispatch/tuning/tuning_transform.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/tuple>

#ifndef __CUDACC_RTC__
// Under NVRTC, libcu++'s threading support (which the transform kernel's headers reach) takes the CUDA
// thread API, where nvcc takes pthread's: included here too, so that nvcc's dependency list, which the
// JIT's header bundle is made from, names the two headers NVRTC will ask for (docs/DESIGN.md, "Headers
// in memory").
#  include <cuda/std/__thread/threading_support_cuda.h>
#  include <cuda/std/__thread/threading_support_external.h>
#endif

namespace kiln_prim {

// cub::DeviceTransform::Transform(const T* in, R* out, std::int64_t n, Op op) spelled out
// (device_transform.cuh, dispatch_transform.cuh): the offset is a signed 64-bit integer, the
// policy hub the one for unstable addresses over a tuple of the one input. One kernel: transform_kernel,
// which runs the prefetch or the bulk-copy (ublkcp, sm_90 and later) algorithm as the policy says. In: the
// input iterator, void for const T* (kiln_prim/iterators.cuh for lazy ones), yielding T; CUB's policy
// takes the bulk copy only for contiguous input, so a lazy input always runs the prefetch algorithm.
template <typename T, typename R, typename Op, typename In = void>
struct transform {
  using input_t = input_iterator_t<T, In>;
  using output_t = R*;
  // choose_signed_offset<std::int64_t>'s ::cuda::std::int64_t, spelled so that the kernel's name is one:
  // that is `long` to nvcc on an LP64 host and `long long` to NVRTC, and the name mangles the type.
  using offset_t = long long;
  using op_t = Op;
  using policy_hub = cub::detail::transform::policy_hub<false, ::cuda::std::tuple<input_t>>;
  using max_policy = typename policy_hub::max_policy;
};

}  // namespace kiln_prim
