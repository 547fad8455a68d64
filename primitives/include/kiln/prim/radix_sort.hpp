// Device-wide radix sort of key/value pairs, ascending, over all key bits
// (cub::DeviceRadixSort::SortPairs) through kiln's registry. Specs: radix_sort_pairs_<K>
// (i32, i64, u64, f64, …); values are std::int32_t.
//
// The sort is stable: pairs with equal keys keep their input order. Keys are ordered as CUB orders them:
// integers by value; doubles by their bits after CUB's twiddle (sign bit set: all bits flipped, else only
// the sign bit), which is numeric order for numbers and infinities, except that -0.0 and +0.0 are equal
// keys (they keep their input order and their own bits). NaNs are not numbers to the sort: a NaN with the
// sign bit clear sorts after +inf, one with the sign bit set before -inf (by payload: positive NaNs in
// increasing, negative NaNs in decreasing order of their bits).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

// Two device buffers of n items, one of which holds the current data (cub::DoubleBuffer's shape). A
// double-buffer sort reads current(), may overwrite both, and sets `selector` to the one holding the
// sorted result.
template <typename T>
struct DoubleBuffer {
  T* buffers[2] = {nullptr, nullptr};
  int selector = 0;

  DoubleBuffer() = default;
  DoubleBuffer(T* current, T* alternate) : buffers{current, alternate} {}
  T* current() const { return buffers[selector]; }
  T* alternate() const { return buffers[selector ^ 1]; }
};

template <typename K>  // a type of KILN_PRIM_RADIX_SORT_PAIRS_TYPES
class RadixSortPairs {
 public:
  using Value = std::int32_t;

  explicit RadixSortPairs(Registry& registry = prim::registry());

  // Out of place, like cub::DeviceRadixSort::SortPairs with pointers: keys_in and values_in are left as
  // they are; the sorted pairs go to keys_out and values_out (which must not overlap the inputs). The
  // temporary storage includes room for a third copy of keys and values, as CUB's does.
  std::size_t temp_bytes(std::size_t n) const;
  // Thread-safe: a plan's const calls only read it.
  void operator()(const K* keys_in, K* keys_out, const Value* values_in, Value* values_out, std::size_t n,
                  TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const K* keys_in, K* keys_out, const Value* values_in, Value* values_out, std::size_t n,
                  CUstream stream = nullptr);

  // Double buffer, like cub::DeviceRadixSort::SortPairs with cub::DoubleBuffer: both buffers of each pair
  // may be overwritten, and each selector is updated to the buffer that holds the sorted result. Needs
  // far less temporary storage (no third copy) than the out-of-place form.
  std::size_t temp_bytes_double_buffer(std::size_t n) const;
  void operator()(DoubleBuffer<K>& keys, DoubleBuffer<Value>& values, std::size_t n, TempStorage temp,
                  CUstream stream = nullptr) const;
  void operator()(DoubleBuffer<K>& keys, DoubleBuffer<Value>& values, std::size_t n, CUstream stream = nullptr);

  // Under the policy for the loaded binary's architecture: the largest n sorted by one block (CUB's
  // single-tile kernel); the items per tile of the onesweep kernel, which sorts larger inputs; and the
  // items per portion (inputs longer than one portion are sorted in several onesweep launches per pass).
  std::size_t single_tile_items() const;
  std::size_t tile_items() const;
  std::size_t portion_items() const;

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary.
  const Kernel& kernel() const { return onesweep_; }

 private:
  Registry* registry_;
  CUdevice device_;
  Kernel single_tile_, histogram_, exclusive_sum_, onesweep_;
  Workspace workspace_;
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(K) extern template class RadixSortPairs<K>;
KILN_PRIM_RADIX_SORT_PAIRS_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot, out of place: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename K>
void radix_sort_pairs(const K* keys_in, K* keys_out, const std::int32_t* values_in, std::int32_t* values_out,
                      std::size_t n, CUstream stream = nullptr);

// One-shot, double buffer.
template <typename K>
void radix_sort_pairs(DoubleBuffer<K>& keys, DoubleBuffer<std::int32_t>& values, std::size_t n,
                      CUstream stream = nullptr);

}  // namespace kiln::prim
