// One sum, minimum or maximum per segment
// (cub::DeviceSegmentedReduce::Sum/Min/Max) through kiln's registry.
// Specs: segmented_reduce_<op>_<T> (sum_i32, sum_f64, min_f64, max_f64, …), a row each in
// kernels/primitives.toml.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

// The reduction a SegmentedReduce applies: CUB's ::cuda::std::plus<>, ::cuda::minimum<>, ::cuda::maximum<>.
enum class ReduceOp { sum, min, max };

namespace detail {
template <typename T, ReduceOp Op>
struct SegmentedReducePlan;  // SegmentedReduction<T, Op's functor> on segmented_reduce_<op>_<T>
}  // namespace detail

// For i < num_segments: out[i] = op(init, in[offsets[i]] op … op in[offsets[i+1] - 1]), with CUB's start
// value: init = T{} for sum, std::numeric_limits<T>::max() for min, std::numeric_limits<T>::lowest() for
// max (device_segmented_reduce.cuh). `offsets` holds num_segments + 1 non-decreasing int32 offsets into
// `in` (CUB's begin = offsets, end = offsets + 1); a segment with offsets[i] == offsets[i+1] is empty and
// gets init. num_segments = 0 writes nothing.
//
// Each segment is reduced by one thread block in CUB's order, which depends only on the policy, the
// segment's length and the alignment of its first item: the same bits as cub::DeviceSegmentedReduce on the
// same architecture. The consequences, all CUB's:
//  - sum: std::int32_t wraps; double is added in a tree order (differs from a sequential sum by rounding;
//    exact for integer values below 2^53); a segment of -0.0 alone gives +0.0 (init + aggregate).
//  - min is (a < b) ? a : b and max is (a < b) ? b : a, with init the left operand of the last step, so:
//    an empty segment gives DBL_MAX (min) or -DBL_MAX (max), not an infinity; a segment of only +inf
//    gives DBL_MAX under min, and a segment of only -inf gives -DBL_MAX under max (init wins the
//    comparison). Where the extreme is a zero and the segment holds both -0.0 and +0.0, which zero comes
//    out depends on the order (equal operands: min keeps the right one, max the left one).
//  - NaN: every comparison with NaN is false, so min(x, NaN) = NaN but min(NaN, x) = x, and
//    max(x, NaN) = x but max(NaN, x) = NaN. Whether a NaN survives, and which elements it hides, depends on
//    where it falls in the order. Two rules hold in any order: min of a segment of only NaN gives that NaN,
//    and max of any segment whose aggregate is NaN (for one, a segment of only NaN) gives -DBL_MAX.
template <typename T, ReduceOp Op>  // a pair of KILN_PRIM_SEGMENTED_REDUCE_TYPES
class SegmentedReduce : public detail::FixedPlan<detail::SegmentedReducePlan<T, Op>> {
 public:
  explicit SegmentedReduce(Registry& registry = prim::registry());

  // Thread-safe: a plan's const calls only read it. `out` has num_segments elements, not part of `in`.
  void operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets, TempStorage temp,
                  CUstream stream = nullptr) const;
  // With storage the plan owns (allocated once).
  void operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                  CUstream stream = nullptr);

  // From detail::FixedPlan: temp_bytes(num_segments), the temporary storage a call with num_segments segments needs
  // (1 byte, never used, when there are any: CUB asks for it); tile_items(), the items per tile of the segment
  // kernel under the policy for the loaded binary's architecture (a longer segment is reduced in several tiles by
  // its block); kernel(), where the kernel came from (embedded, disk, JIT) and the arch of its binary.
};

template <typename T>
using SegmentedSum = SegmentedReduce<T, ReduceOp::sum>;
template <typename T>
using SegmentedMin = SegmentedReduce<T, ReduceOp::min>;
template <typename T>
using SegmentedMax = SegmentedReduce<T, ReduceOp::max>;

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(T, Op) extern template class SegmentedReduce<T, ReduceOp::Op>;
KILN_PRIM_SEGMENTED_REDUCE_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <ReduceOp Op, typename T>
void segmented_reduce(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets,
                      CUstream stream = nullptr);

}  // namespace kiln::prim
