// Sorting keys within segments (cub::DeviceSegmentedSort::SortKeys, ascending)
// through kiln's registry. Specs: segmented_sort_<K> (i32, f64, …).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

// Where CUB's segmented sort changes algorithm, under the policy for the loaded binary's architecture (in items
// per segment, and segments per call). Tests use them to reach every path.
struct SegmentedSortLimits {
  // More segments than this: a three-way partition first splits them into large, medium and small groups.
  std::size_t partitioning_threshold = 0;
  // Segments of at most this many items are merge sorted by `small_segment_threads` threads (partitioned calls).
  std::size_t small_segment_items = 0;
  std::size_t small_segment_threads = 0;
  // Segments of at most this many items (and not small) are merge sorted by `medium_segment_threads` threads.
  std::size_t medium_segment_items = 0;
  std::size_t medium_segment_threads = 0;
  // Larger segments are radix sorted by one block each: in shared memory when shorter than this, otherwise in
  // passes through global memory.
  std::size_t large_tile_items = 0;
};

// Sorts, for each segment i < num_segments, keys_in[offsets[i], offsets[i+1]) ascending into the same range of
// keys_out; items outside every segment are left as they were in keys_out. keys_in is not written; in and out
// must not overlap. `offsets` (device memory) holds num_segments + 1 int32 offsets; a segment whose end is not
// after its begin is empty. n is the length of the key arrays.
//
// Order (as CUB's): integers by value. For doubles, segments of more than limits().medium_segment_items are
// radix sorted on the sign-twiddled bits with -0.0 ranked as +0.0 (stable): -NaN (sign bit set) < -inf < … <
// -0.0 = +0.0 < … < +inf < +NaN, equal zeros keeping their input order; +NaNs by ascending bit pattern, -NaNs
// by descending. Smaller segments are merge sorted by a (sub-)warp with operator<: stable, zeros as above, but a
// NaN compares with nothing, so where NaNs land in such a segment follows from CUB's merge network (the tests
// replay it), not from any order.
template <typename K>  // a type of KILN_PRIM_SEGMENTED_SORT_TYPES
class SegmentedSort : detail::PlanBase {
 public:
  explicit SegmentedSort(Registry& registry = prim::registry());

  // Temporary storage a call with n keys in num_segments segments needs.
  std::size_t temp_bytes(std::size_t n, std::size_t num_segments) const;

  // Thread-safe: a plan's const calls only read it. With more than limits().partitioning_threshold segments the
  // call waits for `stream` (CUB reads the size of each segment group back to the host), otherwise it only
  // enqueues.
  void operator()(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                  const std::int32_t* offsets, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when the call outgrows it).
  void operator()(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                  const std::int32_t* offsets, CUstream stream = nullptr);

  // Items per tile of the large-segment radix sort: segments from this size on are sorted in global memory.
  std::size_t tile_items() const { return limits().large_tile_items; }
  SegmentedSortLimits limits() const;

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary.
  const Kernel& kernel() const { return large_; }

 private:
  Kernel fallback_, small_, large_, partition_init_, partition_;
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(K) extern template class SegmentedSort<K>;
KILN_PRIM_SEGMENTED_SORT_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename K>
void segmented_sort(const K* keys_in, K* keys_out, std::size_t n, std::size_t num_segments,
                    const std::int32_t* offsets, CUstream stream = nullptr);

}  // namespace kiln::prim
