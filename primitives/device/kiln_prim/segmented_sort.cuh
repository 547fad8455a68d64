// Segmented sort (keys only, ascending): the types CUB's kernels (kiln_prim/cccl/segmented_sort.cuh) are
// instantiated with, shared by the kernel units (templates/families/prim/segmented_sort.toml) and the host
// orchestration (primitives/src/segmented_sort.cu).
//
// The partition's input and unselected output are thrust::counting_iterator and thrust::reverse_iterator in
// CUB; thrust's ABI namespace puts the compiler's architecture list into every mangled name, which the
// registry's one lowered name per kernel cannot follow, so two equivalent iterators stand in for them here.
#pragma once

#include <kiln_prim/cccl/segmented_sort.cuh>

#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
#include <cuda/std/iterator>

namespace kiln_prim {
namespace segmented_sort {

// --- What DispatchSegmentedSort hands the three-way partition --------------------------------------------

// The partition's tile state, cub::ScanTileState<accumulator_pack_t<per_partition_offset_t>::pack_t>, under a
// name both compilers mangle alike: pack_t is cuda::std::uint64_t, `unsigned long` to nvcc on LP64 hosts and
// `unsigned long long` to NVRTC. The agent takes it as the base it is.
struct partition_tile_state
    : cub::ScanTileState<typename cub::detail::three_way_partition::accumulator_pack_t<per_partition_offset_t>::pack_t>
{};

// DevicePartition::If's OffsetT, choose_signed_offset_t of the segment counts: cuda::std::int64_t, spelled so
// that nvcc and NVRTC mangle it alike (streaming_context_t<OffsetT> is a kernel parameter).
using partition_offset_t = long long;

// thrust::counting_iterator<local_segment_index_t>(0) in CUB (dispatch_segmented_sort.cuh:1210): segment ids.
struct segment_id_iterator
{
  using value_type        = local_segment_index_t;
  using difference_type   = ::cuda::std::ptrdiff_t;
  using pointer           = const value_type*;
  using reference         = value_type;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  value_type value;

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE value_type operator*() const { return value; }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE value_type operator[](difference_type n) const
  {
    return static_cast<value_type>(value + static_cast<value_type>(n));
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE segment_id_iterator operator+(difference_type n) const
  {
    return {static_cast<value_type>(value + static_cast<value_type>(n))};
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE segment_id_iterator& operator+=(difference_type n)
  {
    value = static_cast<value_type>(value + static_cast<value_type>(n));
    return *this;
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE segment_id_iterator& operator++()
  {
    ++value;
    return *this;
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE difference_type operator-(const segment_id_iterator& other) const
  {
    return static_cast<difference_type>(value) - static_cast<difference_type>(other.value);
  }
};

// thrust::make_reverse_iterator(indices + num_segments) in CUB (dispatch_segmented_sort.cuh:1204-1205): writes
// the medium segments' ids from the end of the large-and-medium array backwards.
struct reverse_index_iterator
{
  using value_type        = local_segment_index_t;
  using difference_type   = ::cuda::std::ptrdiff_t;
  using pointer           = value_type*;
  using reference         = value_type&;
  using iterator_category = ::cuda::std::random_access_iterator_tag;

  value_type* base;  // one past the element this iterator refers to, like std::reverse_iterator::base()

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE reference operator*() const { return base[-1]; }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE reference operator[](difference_type n) const { return base[-n - 1]; }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE reverse_index_iterator operator+(difference_type n) const { return {base - n}; }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE reverse_index_iterator& operator+=(difference_type n)
  {
    base -= n;
    return *this;
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE reverse_index_iterator& operator++()
  {
    --base;
    return *this;
  }
  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE difference_type operator-(const reverse_index_iterator& other) const
  {
    return other.base - base;
  }
};

// DispatchSegmentedSort::LargeSegmentsSelectorT and SmallSegmentsSelectorT (dispatch_segmented_sort.cuh:734-776):
// nested in the host dispatch there, same members and test here.
template <typename OffsetT, typename BeginOffsetIteratorT, typename EndOffsetIteratorT>
struct large_segments_selector
{
  OffsetT value{};
  BeginOffsetIteratorT d_offset_begin{};
  EndOffsetIteratorT d_offset_end{};
  global_segment_offset_t base_segment_offset{};

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE bool operator()(local_segment_index_t segment_id) const
  {
    const OffsetT segment_size =
      d_offset_end[base_segment_offset + segment_id] - d_offset_begin[base_segment_offset + segment_id];
    return segment_size > value;
  }
};

template <typename OffsetT, typename BeginOffsetIteratorT, typename EndOffsetIteratorT>
struct small_segments_selector
{
  OffsetT value{};
  BeginOffsetIteratorT d_offset_begin{};
  EndOffsetIteratorT d_offset_end{};
  global_segment_offset_t base_segment_offset{};

  _CCCL_HOST_DEVICE _CCCL_FORCEINLINE bool operator()(local_segment_index_t segment_id) const
  {
    const OffsetT segment_size =
      d_offset_end[base_segment_offset + segment_id] - d_offset_begin[base_segment_offset + segment_id];
    return segment_size < value;
  }
};

}  // namespace segmented_sort

// cub::DeviceSegmentedSort::SortKeys(temp, bytes, keys_in, keys_out, num_items, num_segments, offsets,
// offsets + 1) over K with int offsets, spelled out: the template arguments of DispatchSegmentedSort and of
// the DispatchThreeWayPartitionIf it runs (device_segmented_sort.cuh:141-172, device_partition.cuh:402-446).
template <typename K>
struct segmented_sort_keys {
  using key_t = K;
  using value_t = cub::NullType;
  static constexpr cub::SortOrder order = cub::SortOrder::Ascending;
  using begin_offset_t = const int*;
  using end_offset_t = const int*;
  using offset_t = int;  // choose_signed_offset_t<int>
  using policy_hub = cub::detail::segmented_sort::policy_hub<K, cub::NullType>;
  using max_policy = typename policy_hub::MaxPolicy;

  // The three-way partition of segment ids into large, small and (the rest) medium segments.
  using partition_input_t = segmented_sort::segment_id_iterator;
  using partition_first_out_t = segmented_sort::local_segment_index_t*;
  using partition_second_out_t = segmented_sort::local_segment_index_t*;
  using partition_unselected_out_t = segmented_sort::reverse_index_iterator;
  using partition_num_selected_t = segmented_sort::local_segment_index_t*;
  using large_selector_t = segmented_sort::large_segments_selector<offset_t, begin_offset_t, end_offset_t>;
  using small_selector_t = segmented_sort::small_segments_selector<offset_t, begin_offset_t, end_offset_t>;
  using partition_offset_t = segmented_sort::partition_offset_t;
  using per_partition_offset_t = segmented_sort::per_partition_offset_t;
  using partition_policy_hub =
    cub::detail::three_way_partition::policy_hub<segmented_sort::local_segment_index_t, per_partition_offset_t>;
  using partition_max_policy = typename partition_policy_hub::MaxPolicy;
  using partition_tile_state = segmented_sort::partition_tile_state;
  using partition_streaming_context = segmented_sort::streaming_context_t<partition_offset_t>;
};

}  // namespace kiln_prim
