// SegmentedSort<K>: kiln's host orchestration of CUB's segmented sort kernels, as
// cub::DeviceSegmentedSort::SortKeys (keys_in, keys_out, offsets, offsets + 1) dispatches them.
//
// CCCL 3.0.1's DispatchSegmentedSort and the DispatchThreeWayPartitionIf it runs take no KernelSource, so the
// two structs below mirror them step for step (same policies through RuntimePolicy, same temporary storage
// layout, same grids, same arguments); comments cite the lines of cub/device/dispatch/ they follow.
#include <kiln/prim/segmented_sort.hpp>

#include <kiln/prim/detail/cub_launch.cuh>
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <kiln_prim/segmented_sort.cuh>

#include <cub/detail/temporary_storage.cuh>
#include <cub/util_device.cuh>
#include <cub/util_temporary_storage.cuh>
#include <cub/util_type.cuh>

#include <cuda/cmath>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace kiln::prim {
namespace {

template <typename K>
using Types = kiln_prim::segmented_sort_keys<detail::kernel_t<K>>;

using kiln_prim::segmented_sort::global_segment_offset_t;
using kiln_prim::segmented_sort::local_segment_index_t;

template <typename K>
std::string spec() { return std::string("segmented_sort_") + detail::type_suffix<K>(); }

struct Kernels {
  detail::KernelRef fallback, small, large, partition_init, partition;
  int sort_ptx = 0;       // the PtxVersion each dispatch chooses its policy by: the arch of the loaded binary
  int partition_ptx = 0;
};

// DispatchThreeWayPartitionIf<InputIt, FirstOut, SecondOut, UnselectedOut, NumSelected, SelectFirst,
// SelectSecond, OffsetT = int64> (dispatch_three_way_partition.cuh:237-552), as DevicePartition::IfNoNVTX
// calls it from the segmented sort (device_partition.cuh:402-446): sizes its storage when d_temp_storage is
// null, otherwise initialises the tile states and partitions the segment ids.
template <typename T>
struct ThreeWayPartition {
  using OffsetT = typename T::partition_offset_t;
  using per_partition_offset_t = typename T::per_partition_offset_t;
  using ScanTileStateT = typename T::partition_tile_state;
  using streaming_context_t = typename T::partition_streaming_context;

  // dispatch_three_way_partition.cuh:257, 265
  static constexpr per_partition_offset_t partition_size = std::numeric_limits<per_partition_offset_t>::max();
  static constexpr int INIT_KERNEL_THREADS = 256;

  void* d_temp_storage;
  std::size_t& temp_storage_bytes;
  typename T::partition_input_t d_in;
  typename T::partition_first_out_t d_first_part_out;
  typename T::partition_second_out_t d_second_part_out;
  typename T::partition_unselected_out_t d_unselected_out;
  typename T::partition_num_selected_t d_num_selected_out;
  typename T::large_selector_t select_first_part_op;
  typename T::small_selector_t select_second_part_op;
  OffsetT num_items;
  CUstream stream;
  const Kernels& kernels;
  const detail::LauncherFactory& factory;

  // dispatch_three_way_partition.cuh:308-477
  template <typename ActivePolicyT>
  cudaError_t Invoke() {
    cudaError_t error = cudaSuccess;

    constexpr int block_threads = ActivePolicyT::ThreeWayPartitionPolicy::BLOCK_THREADS;
    constexpr int items_per_thread = ActivePolicyT::ThreeWayPartitionPolicy::ITEMS_PER_THREAD;
    constexpr int tile_size = block_threads * items_per_thread;

    const auto max_partition_size = static_cast<OffsetT>(
        (std::min)(static_cast<std::uint64_t>(num_items), static_cast<std::uint64_t>(partition_size)));
    const auto num_partitions = (max_partition_size == 0) ? OffsetT{1} : ::cuda::ceil_div(num_items, max_partition_size);
    const auto max_num_tiles_per_invocation = static_cast<OffsetT>(::cuda::ceil_div(max_partition_size, tile_size));

    constexpr std::size_t num_counters_per_pass = 3;
    constexpr std::size_t num_streaming_counters = 2 * num_counters_per_pass;
    const std::size_t streaming_selection_storage_bytes =
        (num_partitions > 1) ? num_streaming_counters * sizeof(OffsetT) : std::size_t{0};

    std::size_t allocation_sizes[2] = {0ULL, streaming_selection_storage_bytes};
    error = ScanTileStateT::AllocationSize(static_cast<int>(max_num_tiles_per_invocation), allocation_sizes[0]);
    if (error != cudaSuccess) return error;

    void* allocations[2] = {};
    error = cub::detail::AliasTemporaries(d_temp_storage, temp_storage_bytes, allocations, allocation_sizes);
    if (error != cudaSuccess) return error;
    if (d_temp_storage == nullptr) return cudaSuccess;

    OffsetT* tmp_num_selected_out = static_cast<OffsetT*>(allocations[1]);
    streaming_context_t streaming_context{tmp_num_selected_out, tmp_num_selected_out + num_counters_per_pass,
                                          num_partitions <= 1};

    for (OffsetT partition_idx = 0; partition_idx < num_partitions; partition_idx++) {
      const OffsetT current_partition_offset = partition_idx * max_partition_size;
      const OffsetT current_num_items =
          (partition_idx + 1 == num_partitions) ? (num_items - current_partition_offset) : max_partition_size;
      const auto current_num_tiles = static_cast<int>(::cuda::ceil_div(current_num_items, tile_size));

      ScanTileStateT tile_status;
      error = tile_status.Init(current_num_tiles, allocations[0], allocation_sizes[0]);
      if (error != cudaSuccess) return error;

      // three_way_partition_init_kernel (dispatch_three_way_partition.cuh:386-397)
      const int init_grid_size = (std::max)(1, ::cuda::ceil_div(current_num_tiles, INIT_KERNEL_THREADS));
      error = factory(init_grid_size, INIT_KERNEL_THREADS, 0, stream)
                  .doit(kernels.partition_init, tile_status, current_num_tiles, d_num_selected_out);
      if (error != cudaSuccess) return error;

      // No more items: the init kernel has written the zero counts (dispatch_three_way_partition.cuh:413-418).
      if (current_num_items == 0) return cudaSuccess;

      // three_way_partition_kernel (dispatch_three_way_partition.cuh:444-456)
      error = factory(current_num_tiles, block_threads, 0, stream)
                  .doit(kernels.partition, d_in, d_first_part_out, d_second_part_out, d_unselected_out,
                        d_num_selected_out, tile_status, select_first_part_op, select_second_part_op,
                        static_cast<per_partition_offset_t>(current_num_items), current_num_tiles, streaming_context);
      if (error != cudaSuccess) return error;

      streaming_context.advance(current_num_items, (partition_idx + OffsetT{2} == num_partitions));
    }
    return error;
  }

  cudaError_t run() {
    return detail::RuntimePolicy<typename T::partition_max_policy>::Invoke(kernels.partition_ptx, *this);
  }
};

// DispatchSegmentedSort<Ascending, K, NullType, int, const int*, const int*> (dispatch_segmented_sort.cuh:720-1376)
// with is_overwrite_okay = false, as DeviceSegmentedSort::SortKeysNoNVTX(keys_in, keys_out, …) builds it
// (device_segmented_sort.cuh:141-172).
template <typename K>
struct SortKeys {
  using T = Types<K>;
  using KeyT = typename T::key_t;
  using ValueT = typename T::value_t;
  using OffsetT = typename T::offset_t;
  using BeginOffsetIteratorT = typename T::begin_offset_t;
  using EndOffsetIteratorT = typename T::end_offset_t;

  static constexpr bool KEYS_ONLY = std::is_same_v<ValueT, cub::NullType>;
  static constexpr std::size_t num_selected_groups = 2;  // dispatch_segmented_sort.cuh:779
  static constexpr bool is_overwrite_okay = false;

  void* d_temp_storage;
  std::size_t& temp_storage_bytes;
  cub::DoubleBuffer<KeyT> d_keys;
  cub::DoubleBuffer<ValueT> d_values;
  std::int64_t num_items;
  global_segment_offset_t num_segments;
  BeginOffsetIteratorT d_begin_offsets;
  EndOffsetIteratorT d_end_offsets;
  CUstream stream;
  const Kernels& kernels;
  const detail::LauncherFactory& factory;

  // dispatch_segmented_sort.cuh:854-1092
  template <typename ActivePolicyT>
  cudaError_t Invoke() {
    using LargeSegmentPolicyT = typename ActivePolicyT::LargeSegmentPolicy;
    using SmallAndMediumPolicyT = typename ActivePolicyT::SmallAndMediumSegmentedSortPolicyT;
    constexpr int radix_bits = LargeSegmentPolicyT::RADIX_BITS;

    cudaError_t error = cudaSuccess;

    const bool partition_segments = num_segments > ActivePolicyT::PARTITIONING_THRESHOLD;

    cub::detail::temporary_storage::layout<5> temporary_storage_layout;
    auto keys_slot = temporary_storage_layout.get_slot(0);
    auto values_slot = temporary_storage_layout.get_slot(1);
    auto large_and_medium_partitioning_slot = temporary_storage_layout.get_slot(2);
    auto small_partitioning_slot = temporary_storage_layout.get_slot(3);
    auto group_sizes_slot = temporary_storage_layout.get_slot(4);

    auto keys_allocation = keys_slot->template create_alias<KeyT>();
    auto values_allocation = values_slot->template create_alias<ValueT>();
    if (!is_overwrite_okay) {
      keys_allocation.grow(num_items);
      if (!KEYS_ONLY) values_allocation.grow(num_items);
    }

    auto large_and_medium_segments_indices =
        large_and_medium_partitioning_slot->template create_alias<local_segment_index_t>();
    auto small_segments_indices = small_partitioning_slot->template create_alias<local_segment_index_t>();
    auto group_sizes = group_sizes_slot->template create_alias<local_segment_index_t>();

    std::size_t three_way_partition_temp_storage_bytes{};

    typename T::large_selector_t large_segments_selector{
        SmallAndMediumPolicyT::MediumPolicyT::ITEMS_PER_TILE, d_begin_offsets, d_end_offsets, 0};
    typename T::small_selector_t small_segments_selector{
        SmallAndMediumPolicyT::SmallPolicyT::ITEMS_PER_TILE + 1, d_begin_offsets, d_end_offsets, 0};

    // The partition's storage shares the slot of the keys' double buffer (dispatch_segmented_sort.cuh:918).
    auto device_partition_temp_storage = keys_slot->template create_alias<std::uint8_t>();

    if (partition_segments) {
      constexpr auto num_segments_per_invocation_limit =
          static_cast<global_segment_offset_t>(std::numeric_limits<int>::max());
      const auto max_num_segments_per_invocation = static_cast<global_segment_offset_t>(
          (std::min)(static_cast<global_segment_offset_t>(num_segments), num_segments_per_invocation_limit));

      large_and_medium_segments_indices.grow(max_num_segments_per_invocation);
      small_segments_indices.grow(max_num_segments_per_invocation);
      group_sizes.grow(num_selected_groups);

      error = partition(nullptr, three_way_partition_temp_storage_bytes, large_and_medium_segments_indices.get(),
                        small_segments_indices.get(),
                        typename T::partition_unselected_out_t{large_and_medium_segments_indices.get()},
                        group_sizes.get(), max_num_segments_per_invocation, large_segments_selector,
                        small_segments_selector);
      if (error != cudaSuccess) return error;

      device_partition_temp_storage.grow(three_way_partition_temp_storage_bytes);
    }

    if (d_temp_storage == nullptr) {
      temp_storage_bytes = temporary_storage_layout.get_size();
      return cudaSuccess;
    }

    if (num_items == 0 || num_segments == 0) return cudaSuccess;

    error = temporary_storage_layout.map_to_buffer(d_temp_storage, temp_storage_bytes);
    if (error != cudaSuccess) return error;

    // The double buffer ends on keys_out after the last radix pass (dispatch_segmented_sort.cuh:974-1033).
    const bool is_num_passes_odd = GetNumPasses(radix_bits) & 1;

    cub::detail::device_double_buffer<KeyT> d_keys_double_buffer(
        (is_overwrite_okay || is_num_passes_odd) ? d_keys.Alternate() : keys_allocation.get(),
        (is_overwrite_okay)   ? d_keys.Current()
        : (is_num_passes_odd) ? keys_allocation.get()
                              : d_keys.Alternate());

    cub::detail::device_double_buffer<ValueT> d_values_double_buffer(
        (is_overwrite_okay || is_num_passes_odd) ? d_values.Alternate() : values_allocation.get(),
        (is_overwrite_okay)   ? d_values.Current()
        : (is_num_passes_odd) ? values_allocation.get()
                              : d_values.Alternate());

    if (partition_segments) {
      error = SortWithPartitioning<LargeSegmentPolicyT, SmallAndMediumPolicyT>(
          three_way_partition_temp_storage_bytes, d_keys_double_buffer, d_values_double_buffer,
          large_segments_selector, small_segments_selector, device_partition_temp_storage,
          large_and_medium_segments_indices, small_segments_indices, group_sizes);
    } else {
      error = SortWithoutPartitioning<LargeSegmentPolicyT>(d_keys_double_buffer, d_values_double_buffer);
    }
    return error;
  }

  cudaError_t run() {
    return detail::RuntimePolicy<typename T::max_policy>::Invoke(kernels.sort_ptx, *this);
  }

 private:
  // DevicePartition::IfNoNVTX(temp, bytes, counting_iterator(0), large_and_medium, small, medium_reversed,
  // group_sizes, n, large_selector, small_selector, stream) (dispatch_segmented_sort.cuh:934-945, 1207-1218).
  cudaError_t partition(void* temp, std::size_t& bytes, local_segment_index_t* first, local_segment_index_t* second,
                        typename T::partition_unselected_out_t unselected, local_segment_index_t* num_selected,
                        global_segment_offset_t n, const typename T::large_selector_t& large_selector,
                        const typename T::small_selector_t& small_selector) const {
    ThreeWayPartition<T> dispatch{temp, bytes, typename T::partition_input_t{0}, first, second, unselected,
                                  num_selected, large_selector, small_selector,
                                  static_cast<typename T::partition_offset_t>(n), stream, kernels, factory};
    return dispatch.run();
  }

  // dispatch_segmented_sort.cuh:1143-1167
  int GetNumPasses(int radix_bits) const {
    constexpr int byte_size = 8;
    constexpr int num_bits = sizeof(KeyT) * byte_size;
    return ::cuda::ceil_div(num_bits, radix_bits);
  }

  int GetFinalSelector(int selector, int radix_bits) const {
    if (!is_overwrite_okay) return (selector + 1) & 1;  // sorted data always ends up in the other vector
    return (selector + GetNumPasses(radix_bits)) & 1;
  }

  template <typename U>
  U* GetFinalOutput(int radix_bits, cub::DoubleBuffer<U>& buffer) const {
    return buffer.d_buffers[GetFinalSelector(buffer.selector, radix_bits)];
  }

  // dispatch_segmented_sort.cuh:1169-1324, the host path (NV_IS_HOST), with DeviceSegmentedSortContinuation
  // (dispatch_segmented_sort.cuh:529-653) inlined.
  template <typename LargeSegmentPolicyT, typename SmallAndMediumPolicyT>
  cudaError_t SortWithPartitioning(
      std::size_t three_way_partition_temp_storage_bytes,
      cub::detail::device_double_buffer<KeyT>& d_keys_double_buffer,
      cub::detail::device_double_buffer<ValueT>& d_values_double_buffer,
      typename T::large_selector_t& large_segments_selector, typename T::small_selector_t& small_segments_selector,
      cub::detail::temporary_storage::alias<std::uint8_t>& device_partition_temp_storage,
      cub::detail::temporary_storage::alias<local_segment_index_t>& large_and_medium_segments_indices,
      cub::detail::temporary_storage::alias<local_segment_index_t>& small_segments_indices,
      cub::detail::temporary_storage::alias<local_segment_index_t>& group_sizes) {
    cudaError_t error = cudaSuccess;

    constexpr global_segment_offset_t num_segments_per_invocation_limit =
        static_cast<global_segment_offset_t>(std::numeric_limits<int>::max());

    const global_segment_offset_t num_invocations =
        ::cuda::ceil_div(static_cast<global_segment_offset_t>(num_segments), num_segments_per_invocation_limit);
    for (global_segment_offset_t invocation_index = 0; invocation_index < num_invocations; invocation_index++) {
      const global_segment_offset_t current_seg_offset = invocation_index * num_segments_per_invocation_limit;
      const local_segment_index_t current_num_segments =
          (invocation_index == (num_invocations - 1))
              ? static_cast<local_segment_index_t>(num_segments - current_seg_offset)
              : num_segments_per_invocation_limit;

      large_segments_selector.base_segment_offset = current_seg_offset;
      small_segments_selector.base_segment_offset = current_seg_offset;
      const BeginOffsetIteratorT current_begin_offset = d_begin_offsets + current_seg_offset;
      const EndOffsetIteratorT current_end_offset = d_end_offsets + current_seg_offset;

      error = partition(device_partition_temp_storage.get(), three_way_partition_temp_storage_bytes,
                        large_and_medium_segments_indices.get(), small_segments_indices.get(),
                        typename T::partition_unselected_out_t{large_and_medium_segments_indices.get() +
                                                               current_num_segments},
                        group_sizes.get(), current_num_segments, large_segments_selector, small_segments_selector);
      if (error != cudaSuccess) return error;

      // The group sizes come back to the host, which sizes the sort kernels' grids (dispatch_segmented_sort.cuh:1281-1298).
      local_segment_index_t h_group_sizes[num_selected_groups];
      error = cudaMemcpyAsync(h_group_sizes, group_sizes.get(), num_selected_groups * sizeof(local_segment_index_t),
                              cudaMemcpyDeviceToHost, stream);
      if (error != cudaSuccess) return error;
      error = cudaStreamSynchronize(stream);
      if (error != cudaSuccess) return error;

      // DeviceSegmentedSortContinuation (dispatch_segmented_sort.cuh:537-653), num_segments = current_num_segments.
      KeyT* d_current_keys = d_keys.Current();
      KeyT* d_final_keys = GetFinalOutput<KeyT>(LargeSegmentPolicyT::RADIX_BITS, d_keys);
      ValueT* d_current_values = d_values.Current();
      ValueT* d_final_values = GetFinalOutput<ValueT>(LargeSegmentPolicyT::RADIX_BITS, d_values);
      local_segment_index_t* large_and_medium = large_and_medium_segments_indices.get();

      const local_segment_index_t large_segments = h_group_sizes[0];
      if (large_segments > 0) {
        // One CTA per segment
        const local_segment_index_t blocks_in_grid = large_segments;
        error = factory(blocks_in_grid, LargeSegmentPolicyT::BLOCK_THREADS, 0, stream)
                    .doit(kernels.large, static_cast<const local_segment_index_t*>(large_and_medium),
                          static_cast<const KeyT*>(d_current_keys), d_final_keys, d_keys_double_buffer,
                          static_cast<const ValueT*>(d_current_values), d_final_values, d_values_double_buffer,
                          current_begin_offset, current_end_offset);
        if (error != cudaSuccess) return error;
      }

      const local_segment_index_t small_segments = h_group_sizes[1];
      const local_segment_index_t medium_segments =
          static_cast<local_segment_index_t>(static_cast<int>(current_num_segments)) - (large_segments + small_segments);
      const local_segment_index_t small_blocks =
          ::cuda::ceil_div(small_segments, SmallAndMediumPolicyT::SEGMENTS_PER_SMALL_BLOCK);
      const local_segment_index_t medium_blocks =
          ::cuda::ceil_div(medium_segments, SmallAndMediumPolicyT::SEGMENTS_PER_MEDIUM_BLOCK);
      const local_segment_index_t small_and_medium_blocks_in_grid = small_blocks + medium_blocks;

      if (small_and_medium_blocks_in_grid) {
        error = factory(small_and_medium_blocks_in_grid, SmallAndMediumPolicyT::BLOCK_THREADS, 0, stream)
                    .doit(kernels.small, small_segments, medium_segments, medium_blocks,
                          static_cast<const local_segment_index_t*>(small_segments_indices.get()),
                          static_cast<const local_segment_index_t*>(large_and_medium + current_num_segments -
                                                                    medium_segments),
                          static_cast<const KeyT*>(d_current_keys), d_final_keys,
                          static_cast<const ValueT*>(d_current_values), d_final_values, current_begin_offset,
                          current_end_offset);
        if (error != cudaSuccess) return error;
      }
    }
    return error;
  }

  // dispatch_segmented_sort.cuh:1326-1375
  template <typename LargeSegmentPolicyT>
  cudaError_t SortWithoutPartitioning(cub::detail::device_double_buffer<KeyT>& d_keys_double_buffer,
                                      cub::detail::device_double_buffer<ValueT>& d_values_double_buffer) {
    const auto blocks_in_grid = static_cast<local_segment_index_t>(num_segments);
    constexpr auto threads_in_block = static_cast<unsigned int>(LargeSegmentPolicyT::BLOCK_THREADS);
    return factory(blocks_in_grid, threads_in_block, 0, stream)
        .doit(kernels.fallback, static_cast<const KeyT*>(d_keys.Current()),
              GetFinalOutput(LargeSegmentPolicyT::RADIX_BITS, d_keys), d_keys_double_buffer,
              static_cast<const ValueT*>(d_values.Current()), GetFinalOutput(LargeSegmentPolicyT::RADIX_BITS, d_values),
              d_values_double_buffer, d_begin_offsets, d_end_offsets);
  }
};

// One segmented sort: sizes the storage when temp.data is null, runs otherwise.
template <typename K>
std::size_t dispatch(CUdevice device, const Kernels& kernels, const K* in, K* out, std::size_t n,
                     std::size_t num_segments, const std::int32_t* offsets, TempStorage temp, CUstream stream) {
  using T = Types<K>;
  using KeyT = typename T::key_t;
  const auto items = detail::checked_count(n, "segmented_sort");
  const auto segments = detail::checked_count(num_segments, "segmented_sort");
  detail::LaunchStatus status;
  detail::LauncherFactory factory(device, static_cast<unsigned>(kernels.sort_ptx / 10), &status);
  std::size_t bytes = temp.bytes;
  // The offsets as SortKeys(…, d_offsets, d_offsets + 1) gets them (null when only sizing the storage).
  const auto begin = reinterpret_cast<typename T::begin_offset_t>(offsets);
  const auto end = begin ? begin + 1 : begin;
  // DeviceSegmentedSort::SortKeysNoNVTX: DoubleBuffer(const_cast<KeyT*>(d_keys_in), d_keys_out), no values.
  SortKeys<K> sort{temp.data, bytes, cub::DoubleBuffer<KeyT>(const_cast<KeyT*>(reinterpret_cast<const KeyT*>(in)),
                                                            reinterpret_cast<KeyT*>(out)),
                   cub::DoubleBuffer<cub::NullType>(), std::int64_t(items), global_segment_offset_t(segments), begin,
                   end, stream, kernels, factory};
  const cudaError_t returned = sort.run();
  detail::check_dispatch(returned, status, spec<K>());
  return bytes;
}

// Reads the policy's thresholds the way DispatchSegmentedSort and its kernels use them.
struct LimitsOf {
  SegmentedSortLimits limits;
  template <typename Policy>
  cudaError_t Invoke() {
    using Large = typename Policy::LargeSegmentPolicy;
    using SmallAndMedium = typename Policy::SmallAndMediumSegmentedSortPolicyT;
    limits.partitioning_threshold = Policy::PARTITIONING_THRESHOLD;
    limits.small_segment_items = SmallAndMedium::SmallPolicyT::ITEMS_PER_TILE;
    limits.small_segment_threads = SmallAndMedium::SmallPolicyT::WARP_THREADS;
    limits.medium_segment_items = SmallAndMedium::MediumPolicyT::ITEMS_PER_TILE;
    limits.medium_segment_threads = SmallAndMedium::MediumPolicyT::WARP_THREADS;
    limits.large_tile_items = std::size_t(Large::BLOCK_THREADS) * std::size_t(Large::ITEMS_PER_THREAD);
    return cudaSuccess;
  }
};

}  // namespace

template <typename K>
SegmentedSort<K>::SegmentedSort(Registry& registry)
    : PlanBase(registry, spec<K>()),
      fallback_(registry.get(spec<K>() + "_fallback")),
      small_(registry.get(spec<K>() + "_small")),
      large_(registry.get(spec<K>() + "_large")),
      partition_init_(registry.get(spec<K>() + "_partition_init")),
      partition_(registry.get(spec<K>() + "_partition")) {}

namespace {
Kernels kernels_of(const Kernel& fallback, const Kernel& small, const Kernel& large, const Kernel& init,
                   const Kernel& partition) {
  return {detail::ref(fallback), detail::ref(small), detail::ref(large), detail::ref(init), detail::ref(partition),
          int(large.provenance.arch) * 10, int(partition.provenance.arch) * 10};
}
}  // namespace

template <typename K>
SegmentedSortLimits SegmentedSort<K>::limits() const {
  LimitsOf op;
  detail::RuntimePolicy<typename Types<K>::max_policy>::Invoke(int(large_.provenance.arch) * 10, op);
  return op.limits;
}

template <typename K>
std::size_t SegmentedSort<K>::temp_bytes(std::size_t n, std::size_t num_segments) const {
  const Kernels k = kernels_of(fallback_, small_, large_, partition_init_, partition_);
  return sized(
      [&](TempStorage t) { return dispatch<K>(device_, k, nullptr, nullptr, n, num_segments, nullptr, t, nullptr); });
}

template <typename K>
void SegmentedSort<K>::operator()(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                                  const std::int32_t* offsets, TempStorage temp, CUstream stream) const {
  const Kernels k = kernels_of(fallback_, small_, large_, partition_init_, partition_);
  run(temp,
      [&](TempStorage t) { return dispatch<K>(device_, k, keys_in, keys_out, n, num_segments, offsets, t, stream); });
}

template <typename K>
void SegmentedSort<K>::operator()(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                                  const std::int32_t* offsets, CUstream stream) {
  const Kernels k = kernels_of(fallback_, small_, large_, partition_init_, partition_);
  run([&](TempStorage t) { return dispatch<K>(device_, k, keys_in, keys_out, n, num_segments, offsets, t, stream); });
}

template <typename K>
void segmented_sort(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                    const std::int32_t* offsets, CUstream stream) {
  static detail::OneShot<SegmentedSort<K>> plans;
  const int device = detail::one_shot_device(stream);
  const SegmentedSort<K>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n, num_segments);
  detail::StreamTemp temp(bytes, stream);
  plan(keys_in, keys_out, n, num_segments, offsets, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_PLAN(K) template class SegmentedSort<K>;
#define KILN_PRIM_ONE_SHOT(K) \
  template void segmented_sort(const K*, K*, std::size_t, std::size_t, const std::int32_t*, CUstream);
KILN_PRIM_SEGMENTED_SORT_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_SEGMENTED_SORT_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
