// Unique by key: the types kiln's unique-by-key kernels are instantiated
// with, shared by the kernel units (family kiln.unique_by_key) and the host dispatch
// (primitives/src/unique_by_key.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>
#include <kiln_prim/iterators.cuh>

#include <cub/device/dispatch/kernels/scan.cuh>
#include <cub/device/dispatch/kernels/unique_by_key.cuh>
#include <cub/device/dispatch/tuning/tuning_unique_by_key.cuh>

#include <cuda/std/functional>

namespace kiln_prim {

// cub::DeviceSelect::UniqueByKey(temp, bytes, const K* keys_in, const V* values_in, K* keys_out,
// V* values_out, unsigned long long* num_selected, int n) spelled out: equality Equal (UniqueByKey's
// default ::cuda::std::equal_to<>), 32-bit offsets (cub::detail::choose_offset_t<int>), CUB's default policy
// hub for (K, V). KeysIn, ValuesIn: the input iterators, void for const K* and const V*
// (kiln_prim/iterators.cuh for lazy ones), yielding K and V.
template <typename K, typename V, typename Equal = ::cuda::std::equal_to<>, typename KeysIn = void,
          typename ValuesIn = void>
struct unique_by_key {
  using key_t = K;
  using value_t = V;
  using key_input_t = input_iterator_t<K, KeysIn>;
  using value_input_t = input_iterator_t<V, ValuesIn>;
  using key_output_t = K*;
  using value_output_t = V*;
  using num_selected_t = unsigned long long*;
  using equality_t = Equal;
  using offset_t = unsigned int;
  using tile_state = cub::ScanTileState<offset_t>;
  // DispatchUniqueByKey's default: the hub for the inputs' value types.
  using policy_hub =
      cub::detail::unique_by_key::policy_hub<cub::detail::it_value_t<key_input_t>, cub::detail::it_value_t<value_input_t>>;
  using max_policy = typename policy_hub::MaxPolicy;
};

}  // namespace kiln_prim
