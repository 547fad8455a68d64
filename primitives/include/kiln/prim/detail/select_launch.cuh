// What kiln's select plans share: CUB's DispatchSelectIf::Invoke on a registry's kernels (nvcc only;
// header-only, for kiln's own select.cu and the kiln.select_if plans alike).
//
// CCCL 3.0.1's DispatchSelectIf takes no KernelSource, so this is DispatchSelectIf::Invoke
// (cub/device/dispatch/dispatch_select_if.cuh:557-750) for what cub::DeviceSelect::Flagged and ::If
// instantiate (device_select.cuh: OffsetT int64_t, SelectImpl::Select; kiln_prim::select_common), step for
// step: the same policy (CUB's policy_hub walked by RuntimePolicy), the same tile and virtual-shared-memory
// sizing, the same temporary storage layout, the same partitions of at most 2^31 - 1 items, the same two
// launches per partition with the same grids and arguments.
#pragma once

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/select.cuh>

#include <cub/util_temporary_storage.cuh>

#include <cuda/cmath>

#include <algorithm>
#include <cstddef>
#include <string>

namespace kiln::prim::detail {

// DispatchSelectIf::Invoke<ActivePolicyT>(scan_init_kernel, select_if_kernel), with kiln's launcher.
template <typename T>
struct SelectPass {
  using offset_t = typename T::offset_t;  // DispatchSelectIf's OffsetT (int64)
  using num_total_items_t = offset_t;
  using per_partition_offset_t = typename T::partition_offset_t;
  using streaming_context_t = typename T::streaming_context_t;
  using ScanTileStateT = typename T::tile_state;
  static constexpr int INIT_KERNEL_THREADS = 128;  // DispatchSelectIf::INIT_KERNEL_THREADS

  void* d_temp_storage;
  std::size_t& temp_storage_bytes;
  typename T::input_t d_in;
  typename T::flags_t d_flags;
  typename T::output_t d_selected_out;
  typename T::num_selected_t d_num_selected_out;
  typename T::select_op_t select_op;
  offset_t num_items;
  CUstream stream;
  const LauncherFactory& launcher_factory;
  KernelRef scan_init_kernel, select_if_kernel;

  template <typename ActivePolicyT>
  cudaError_t Invoke() {
    using VsmemHelperT = typename T::template vsmem_helper<typename ActivePolicyT::SelectIfPolicyT>;
    cudaError_t error = cudaSuccess;

    constexpr auto block_threads = VsmemHelperT::agent_policy_t::BLOCK_THREADS;
    constexpr auto items_per_thread = VsmemHelperT::agent_policy_t::ITEMS_PER_THREAD;
    constexpr auto tile_size = static_cast<offset_t>(block_threads * items_per_thread);
    constexpr auto partition_size = T::partition_size;
    constexpr bool may_require_streaming = T::may_require_streaming;

    const auto max_partition_size = (may_require_streaming && num_items > static_cast<offset_t>(partition_size))
                                        ? static_cast<offset_t>(partition_size)
                                        : num_items;
    const auto num_partitions =
        (max_partition_size == 0) ? static_cast<offset_t>(1) : ::cuda::ceil_div(num_items, max_partition_size);
    const auto max_num_tiles_per_invocation = static_cast<offset_t>(::cuda::ceil_div(max_partition_size, tile_size));
    const auto vsmem_size = max_num_tiles_per_invocation * VsmemHelperT::vsmem_per_block;

    std::size_t streaming_selection_storage_bytes = (num_partitions > 1) ? 2 * sizeof(num_total_items_t) : 0;
    std::size_t allocation_sizes[3] = {0ULL, std::size_t(vsmem_size), streaming_selection_storage_bytes};
    error = ScanTileStateT::AllocationSize(static_cast<int>(max_num_tiles_per_invocation), allocation_sizes[0]);
    if (error != cudaSuccess) return error;
    void* allocations[3] = {};
    error = cub::detail::AliasTemporaries(d_temp_storage, temp_storage_bytes, allocations, allocation_sizes);
    if (error != cudaSuccess) return error;
    if (d_temp_storage == nullptr) return cudaSuccess;

    auto* tmp_num_selected_out = reinterpret_cast<num_total_items_t*>(allocations[2]);
    streaming_context_t streaming_context{tmp_num_selected_out, (tmp_num_selected_out + 1), num_items,
                                          (num_partitions <= 1)};

    for (offset_t partition_idx = 0; partition_idx < num_partitions; partition_idx++) {
      const offset_t current_partition_offset = partition_idx * max_partition_size;
      const offset_t current_num_items =
          (partition_idx + 1 == num_partitions) ? (num_items - current_partition_offset) : max_partition_size;

      const auto current_num_tiles = static_cast<int>(::cuda::ceil_div(current_num_items, tile_size));
      ScanTileStateT tile_status;
      error = tile_status.Init(current_num_tiles, allocations[0], allocation_sizes[0]);
      if (error != cudaSuccess) return error;

      const int init_grid_size = std::max(1, ::cuda::ceil_div(current_num_tiles, INIT_KERNEL_THREADS));
      error = launcher_factory(dim3(init_grid_size), dim3(INIT_KERNEL_THREADS), 0, stream)
                  .doit(scan_init_kernel, tile_status, current_num_tiles, d_num_selected_out);
      if (error != cudaSuccess) return error;

      // As CUB: no early return for n == 0 before the init kernel has written the count's 0.
      if (current_num_items == 0) return cudaSuccess;

      error = launcher_factory(dim3(current_num_tiles), dim3(block_threads), 0, stream)
                  .doit(select_if_kernel, d_in, d_flags, d_selected_out, d_num_selected_out, tile_status,
                        select_op, typename T::equality_op_t{},
                        static_cast<per_partition_offset_t>(current_num_items), current_num_tiles, streaming_context,
                        cub::detail::vsmem_t{allocations[1]});
      if (error != cudaSuccess) return error;

      streaming_context.advance(current_num_items, (partition_idx + offset_t{2} == num_partitions));
    }
    return error;
  }
};

// One dispatch: sizes the storage when temp.data is null, runs otherwise. `name` names the unit in errors.
template <typename T>
std::size_t select_dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, typename T::input_t in,
                            typename T::flags_t flags, typename T::output_t out, typename T::num_selected_t count,
                            long long items, typename T::select_op_t select_op, TempStorage temp, CUstream stream,
                            const std::string& name) {
  LaunchStatus status;
  LauncherFactory factory(device, sweep.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  SelectPass<T> pass{temp.data, bytes,  in,     flags,   out,       count,     select_op,
                     items,     stream, factory, ref(init), ref(sweep)};
  const cudaError_t returned = RuntimePolicy<typename T::max_policy>::Invoke(int(sweep.provenance.arch) * 10, pass);
  check_dispatch(returned, status, name);
  return bytes;
}

// The tile DispatchSelectIf::Invoke sizes with (the policy's, or its virtual-shared-memory fallback's).
template <typename T>
struct SelectTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    using Agent = typename T::template vsmem_helper<typename Policy::SelectIfPolicyT>::agent_policy_t;
    items = std::size_t(Agent::BLOCK_THREADS) * std::size_t(Agent::ITEMS_PER_THREAD);
    return cudaSuccess;
  }
};

template <typename T>
std::size_t select_tile_items(const Kernel& sweep) {
  SelectTile<T> tile;
  RuntimePolicy<typename T::max_policy>::Invoke(int(sweep.provenance.arch) * 10, tile);
  return tile.items;
}

}  // namespace kiln::prim::detail
