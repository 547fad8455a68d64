// Unique by key: the types kiln's unique-by-key kernels are instantiated
// with, shared by the kernel units (templates/families/prim_unique_by_key.cu.j2) and the host dispatch
// (primitives/src/unique_by_key.cu).
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>

#include <cub/device/dispatch/kernels/scan.cuh>
#include <cub/device/dispatch/kernels/unique_by_key.cuh>
#include <cub/device/dispatch/tuning/tuning_unique_by_key.cuh>

#include <cuda/std/functional>

namespace kiln_prim {

// cub::DeviceSelect::UniqueByKey(temp, bytes, const K* keys_in, const V* values_in, K* keys_out,
// V* values_out, unsigned long long* num_selected, int n) spelled out: equality Equal (UniqueByKey's
// default ::cuda::std::equal_to<>), 32-bit offsets (cub::detail::choose_offset_t<int>), CUB's default policy
// hub for (K, V).
template <typename K, typename V, typename Equal = ::cuda::std::equal_to<>>
struct unique_by_key {
  using key_t = K;
  using value_t = V;
  using key_input_t = const K*;
  using value_input_t = const V*;
  using key_output_t = K*;
  using value_output_t = V*;
  using num_selected_t = unsigned long long*;
  using equality_t = Equal;
  using offset_t = unsigned int;
  using tile_state = cub::ScanTileState<offset_t>;
  using policy_hub = cub::detail::unique_by_key::policy_hub<K, V>;
  using max_policy = typename policy_hub::MaxPolicy;
};

}  // namespace kiln_prim
