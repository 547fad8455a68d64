// Device-wide unique by key (cub::DeviceSelect::UniqueByKey) through kiln's
// registry. Specs: unique_by_key_<K> (i32, u64, …).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/plan_types.hpp>  // generated from kernels/primitives.toml

#include <cstddef>
#include <cstdint>

namespace kiln::prim {

namespace detail {
template <typename K>
struct UniqueByKeyPlan;  // Unique<K, int, equal_to> on the unit unique_by_key_<K> (primitives/src/unique_by_key.cu)
}  // namespace detail

// Of each run of consecutive equal keys in keys_in[0, n) (by ==), copies the first key and the value that
// came with it to keys_out and values_out, compacted in input order, and writes the number of runs to
// *num_selected (a device pointer; the call returns before it is written). The inputs are usually sorted,
// so that runs are all the equal keys. No range may overlap another (CUB does not support in place).
template <typename K>  // a type of KILN_PRIM_UNIQUE_BY_KEY_TYPES
class UniqueByKey : public detail::FixedPlan<detail::UniqueByKeyPlan<K>> {
 public:
  using value_type = std::int32_t;

  explicit UniqueByKey(Registry& registry = prim::registry());

  // Thread-safe: a plan's const calls only read it.
  void operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                  std::uint64_t* num_selected, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                  std::uint64_t* num_selected, std::size_t n, CUstream stream = nullptr);

  // From detail::FixedPlan: temp_bytes(n), the temporary storage a call with n items needs; tile_items(), the items
  // per tile of the sweep kernel under the policy for the loaded binary's architecture; kernel(), where the kernels
  // came from (embedded, disk, JIT) and the arch of their binary.
};

// One per row of its family in kernels/primitives.toml (kiln/prim/plan_types.hpp).
#define KILN_PRIM_EXTERN(K) extern template class UniqueByKey<K>;
KILN_PRIM_UNIQUE_BY_KEY_TYPES(KILN_PRIM_EXTERN)
#undef KILN_PRIM_EXTERN

// One-shot: the process-wide plan of the stream's device and stream-ordered temporary storage.
template <typename K>
void unique_by_key(const K* keys_in, const std::int32_t* values_in, K* keys_out, std::int32_t* values_out,
                   std::uint64_t* num_selected, std::size_t n, CUstream stream = nullptr);

}  // namespace kiln::prim
