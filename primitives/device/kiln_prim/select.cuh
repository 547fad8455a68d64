// Stream compaction: the types kiln's select kernels are instantiated with, shared by the kernel units
// (templates/families/prim/select.toml, kiln/select_if.toml) and the host dispatch
// (kiln/prim/detail/select_launch.cuh). What cub::DeviceSelect::Flagged(counting iterator, mask, out,
// num_selected, n) and cub::DeviceSelect::If(in, out, num_selected, n, pred) instantiate, spelled out; the
// sweep kernel is CUB's, copied in kiln_prim/cccl/select_sweep.cuh.
#pragma once

#include <kiln_prim/cccl/select_sweep.cuh>
#include <kiln_prim/iterators.cuh>  // counting_iterator: the indices a select compacts; input_iterator_t

#include <cub/device/dispatch/tuning/tuning_select_if.cuh>
#include <cub/util_type.cuh>
#include <cub/util_vsmem.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/limits>

namespace kiln_prim {

// What DispatchSelectIf instantiates for one cub::DeviceSelect call with SelectImpl::Select: a 64-bit global
// offset (DeviceSelect's OffsetT), hence the streaming context that splits inputs longer than 2^31 - 1
// items into partitions; 32-bit offsets within a partition; CUB's default policy hub for these iterators.
template <typename In, typename Flags, typename Out, typename NumSelected, typename SelectOp>
struct select_common {
  using input_t = In;
  using flags_t = Flags;
  using output_t = Out;
  using num_selected_t = NumSelected;
  using select_op_t = SelectOp;
  using equality_op_t = cub::NullType;
  // DeviceSelect's OffsetT, ::cuda::std::int64_t, spelled `long long`: that is `long` under nvcc on LP64
  // hosts and `long long` under NVRTC, and the kernel's mangled name must not depend on the compiler.
  using offset_t = long long;
  using partition_offset_t = cub_select::per_partition_offset_t;  // int32
  static constexpr cub::SelectImpl impl = cub::SelectImpl::Select;
  static constexpr partition_offset_t partition_size = ::cuda::std::numeric_limits<partition_offset_t>::max();
  static constexpr bool may_require_streaming = true;  // int32 partitions < int64 offsets, as in DispatchSelectIf
  using streaming_context_t = cub_select::streaming_context_t<offset_t, may_require_streaming>;
  using tile_state = cub::ScanTileState<partition_offset_t>;
  using policy_hub = cub::detail::select::policy_hub<cub::detail::it_value_t<In>, cub::detail::it_value_t<Flags>,
                                                     partition_offset_t, false, impl>;
  using max_policy = typename policy_hub::MaxPolicy;
  // What DispatchSelectIf::Invoke sizes the tile with: the policy, or its fallback when the agent's shared
  // memory does not fit (then the kernel uses virtual shared memory in global memory).
  template <typename Policy>
  using vsmem_helper = cub::detail::vsmem_helper_default_fallback_policy_t<
      Policy, cub_select::agent_select_if_wrapper_t<impl>::template agent_t, input_t, flags_t, output_t, select_op_t,
      equality_op_t, partition_offset_t, streaming_context_t>;
};

// cub::DeviceSelect::Flagged(counting_iterator<I>{0}, const uint8_t* mask, I* out, I* num_selected, n).
template <typename I>
struct select_indices
    : select_common<counting_iterator<I>, const ::cuda::std::uint8_t*, I*, I*, cub::NullType> {
  using index_t = I;
};

// cub::DeviceSelect::If(const T* in, T* out, long long* num_selected, n, Pred): the items for which
// pred(item) is true, in their input order. Pred: bool(T). In: the input iterator, void for const T*
// (kiln_prim/iterators.cuh for lazy ones), yielding T.
template <typename T, typename Pred, typename In = void>
struct select_if : select_common<input_iterator_t<T, In>, cub::NullType*, T*, long long*, Pred> {
  using value_t = T;
};

}  // namespace kiln_prim
