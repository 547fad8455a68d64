// The indices of the nonzero bytes of a mask, in increasing order (stream
// compaction: cub::DeviceSelect::Flagged over a counting iterator) through kiln's registry.
// Specs: select_<I> (i32, i64, …: the index type).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

// Writes to out[0, k) the indices i < n with mask[i] != 0 (any nonzero byte keeps its index, 0 drops it),
// in increasing order, and k to *count. mask, out and count are device pointers; out needs room for k
// indices (n at most) and must not overlap mask. n is limited to 2^31 - 1 for std::int32_t indices (every
// index and the count must fit) and to 2^32 - 1 for std::int64_t; larger n throws kiln::Error(Errc::invalid_argument).
template <typename I>  // a type of KILN_PRIM_SELECT_INDICES_TYPES
class SelectIndices : detail::PlanBase {
 public:
  explicit SelectIndices(Registry& registry = prim::registry());

  // Temporary storage a call with n items needs.
  std::size_t temp_bytes(std::size_t n) const;

  // Thread-safe: a plan's const calls only read it.
  void operator()(const std::uint8_t* mask, I* out, I* count, std::size_t n, TempStorage temp,
                  CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const std::uint8_t* mask, I* out, I* count, std::size_t n, CUstream stream = nullptr);

  // Items per tile of the sweep kernel under the policy for the loaded binary's architecture.
  std::size_t tile_items() const;

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary.
  const Kernel& kernel() const { return sweep_; }

 private:
  Kernel init_, sweep_;
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(I) extern template class SelectIndices<I>;
KILN_PRIM_SELECT_INDICES_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename I>
void select_indices(const std::uint8_t* mask, I* out, I* count, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
