// MergeSort<K, V, Compare, KeysIn, ValuesIn>: CUB's DispatchMergeSort on the kernels of a kiln.merge_sort_pairs row of any
// registry. Header-only; include it from a .cu file nvcc compiles (CUB's host dispatch does not compile
// with g++), with kiln's primitive headers on the include path (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/merge_sort.cuh>

#include <cub/device/dispatch/dispatch_merge_sort.cuh>

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::prim {
namespace detail {

// DeviceMergeSortKernelSource (dispatch_merge_sort.cuh) with the registry's kernels.
struct MergeSortSource {
  KernelRef block_sort, partition, merge;
  KernelRef MergeSortBlockSortKernel() const { return block_sort; }
  KernelRef MergeSortPartitionKernel() const { return partition; }
  KernelRef MergeSortMergeKernel() const { return merge; }
};

// The tile and virtual shared memory sizes DispatchMergeSort uses, from the same types as the kernels.
template <typename Types>
using MergeSortVSMem = cub::detail::merge_sort::VSMemHelper<
    typename Types::key_input_t, typename Types::value_input_t, typename Types::key_iterator_t,
    typename Types::value_iterator_t, typename Types::offset_t, typename Types::compare_t, typename Types::key_t,
    typename Types::value_t>;

template <typename Types>
using MergeSortDispatch = cub::DispatchMergeSort<
    typename Types::key_input_t, typename Types::value_input_t, typename Types::key_iterator_t,
    typename Types::value_iterator_t, typename Types::offset_t, typename Types::compare_t,
    typename Types::policy_hub, MergeSortSource, LauncherFactory, MergeSortVSMem<Types>>;

// A unit's three kernels: <unit>_block_sort, <unit>_partition, <unit>_merge.
struct MergeSortKernels {
  Kernel block_sort, partition, merge;
};

inline MergeSortKernels merge_sort_kernels(Registry& registry, const std::string& unit, const LinkedSource* link) {
  return {get_kernel(registry, unit + "_block_sort", link), get_kernel(registry, unit + "_partition", link),
          get_kernel(registry, unit + "_merge", link)};
}

// One CUB dispatch, as cub::DeviceMergeSort::SortPairs makes it (keys and values in place: the input is the
// output) or SortPairsCopy (read through keys_in and values_in, written to keys and values): sizes the
// storage when temp.data is null, runs otherwise. `name` names the unit in errors.
template <typename Types>
std::size_t merge_sort_dispatch(CUdevice device, const Kernel& block_sort, const Kernel& partition,
                                const Kernel& merge, typename Types::key_input_t keys_in,
                                typename Types::value_input_t values_in, typename Types::key_t* keys,
                                typename Types::value_t* values, std::size_t n, typename Types::compare_t compare,
                                TempStorage temp, CUstream stream, const std::string& name) {
  const auto count = checked_count(n, name.c_str());
  LaunchStatus status;
  LauncherFactory factory(device, block_sort.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = MergeSortDispatch<Types>::Dispatch(
      temp.data, bytes, keys_in, values_in, keys, values, count, compare, stream,
      MergeSortSource{ref(block_sort), ref(partition), ref(merge)}, factory,
      RuntimePolicy<typename Types::max_policy>{});
  check_dispatch(returned, status, name);
  return bytes;
}

// Reads a policy's tile the way DispatchMergeSort::Invoke does.
template <typename Types>
struct MergeSortTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    auto policy = cub::detail::merge_sort::MakeMergeSortPolicyWrapper(Policy{});
    items = std::size_t(MergeSortVSMem<Types>::ItemsPerTile(policy.MergeSort()));
    return cudaSuccess;
  }
};

template <typename Types>
std::size_t merge_sort_tile_items(const Kernel& block_sort) {
  MergeSortTile<Types> tile;
  RuntimePolicy<typename Types::max_policy>::Invoke(int(block_sort.provenance.arch) * 10, tile);
  return tile.items;
}

}  // namespace detail

// Sorts keys[0, n) by `compare` (a strict weak order: less-than sorts ascending, greater-than descending)
// in place and moves values[i] with keys[i] (cub::DeviceMergeSort::SortPairs). Stable: pairs whose keys
// compare equal keep their input order. The registry's unit must be a kiln.merge_sort_pairs row with params
// K, V, Compare, KeysIn and ValuesIn naming these same types. With KeysIn or ValuesIn given
// (kiln_prim/iterators.cuh; void stands for const K* or const V*) the plan sorts a copy instead
// (cub::DeviceMergeSort::SortPairsCopy): it reads keys_in and values_in and writes the sorted pairs to keys
// and values, which must not overlap the input.
template <typename K, typename V, typename Compare, typename KeysIn = void, typename ValuesIn = void>
class MergeSort : detail::PlanBase {
  using Types = kiln_prim::merge_sort_pairs<K, V, Compare, KeysIn, ValuesIn>;

 public:
  static constexpr bool copy = Types::copy;                 // sorts from keys_in, values_in into keys, values
  using keys_input_type = typename Types::key_input_t;      // copy: const K*, or KeysIn
  using values_input_type = typename Types::value_input_t;  // copy: const V*, or ValuesIn

  // `link`: the unit is a linked row, and this is the comparator linked into it (kiln/prim/operator.hpp).
  MergeSort(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        kernels_(detail::merge_sort_kernels(registry, unit_, link)) {}

  // Temporary storage a call with n items needs (0 for n == 0).
  std::size_t temp_bytes(std::size_t n) const {
    return sized(dispatch(keys_input_type{}, values_input_type{}, nullptr, nullptr, n, {}, nullptr));
  }

  // In place. Thread-safe: a plan's const calls only read it.
  void operator()(K* keys, V* values, std::size_t n, TempStorage temp, CUstream stream = nullptr,
                  Compare compare = {}) const
    requires(!copy)
  {
    run(temp, dispatch(keys, values, keys, values, n, compare, stream));
  }
  // In place, with storage the plan owns (allocated only when n outgrows it).
  void operator()(K* keys, V* values, std::size_t n, CUstream stream = nullptr, Compare compare = {})
    requires(!copy)
  {
    run(dispatch(keys, values, keys, values, n, compare, stream));
  }
  // Into keys and values, from keys_in and values_in. Thread-safe: a plan's const calls only read it.
  void operator()(keys_input_type keys_in, values_input_type values_in, K* keys, V* values, std::size_t n,
                  TempStorage temp, CUstream stream = nullptr, Compare compare = {}) const
    requires copy
  {
    run(temp, dispatch(keys_in, values_in, keys, values, n, compare, stream));
  }
  // Into keys and values, from keys_in and values_in, with storage the plan owns.
  void operator()(keys_input_type keys_in, values_input_type values_in, K* keys, V* values, std::size_t n,
                  CUstream stream = nullptr, Compare compare = {})
    requires copy
  {
    run(dispatch(keys_in, values_in, keys, values, n, compare, stream));
  }

  // Items per tile of the block-sort and merge kernels under the policy for the loaded binary's architecture.
  std::size_t tile_items() const { return detail::merge_sort_tile_items<Types>(kernels_.block_sort); }

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary: the block-sort kernel.
  const Kernel& kernel() const { return kernels_.block_sort; }

 private:
  // The dispatch of one call, for PlanBase::run.
  auto dispatch(keys_input_type keys_in, values_input_type values_in, K* keys, V* values, std::size_t n,
                Compare compare, CUstream stream) const {
    return [=, this](TempStorage temp) {
      return detail::merge_sort_dispatch<Types>(device_, kernels_.block_sort, kernels_.partition, kernels_.merge,
                                                keys_in, values_in, keys, values, n, compare, temp, stream, unit_);
    };
  }

  detail::MergeSortKernels kernels_;
};

}  // namespace kiln::prim
