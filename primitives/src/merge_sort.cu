// MergeSortPairs<K>: CUB's DispatchMergeSort on the registry's merge_sort_pairs_<K> kernels.
#include <kiln/prim/merge_sort.hpp>

#include <kiln/prim/detail/cub_launch.cuh>
#include "stream_temp.cuh"

#include <kiln_prim/merge_sort.cuh>

#include <cub/device/dispatch/dispatch_merge_sort.cuh>

#include <string>

namespace kiln::prim {
namespace {

// The comparator of the merge_sort_pairs_<K> rows (kernels/primitives.toml, param Compare).
using Less = ::cuda::std::less<>;

template <typename K>
using Types = kiln_prim::merge_sort_pairs<detail::kernel_t<K>, int, Less>;

struct MergeSortSource {
  detail::KernelRef block_sort, partition, merge;
  detail::KernelRef MergeSortBlockSortKernel() const { return block_sort; }
  detail::KernelRef MergeSortPartitionKernel() const { return partition; }
  detail::KernelRef MergeSortMergeKernel() const { return merge; }
};

// The tile and virtual shared memory sizes DispatchMergeSort uses, from the same types as the kernels.
template <typename K>
using VSMem = cub::detail::merge_sort::VSMemHelper<
    typename Types<K>::key_input_t, typename Types<K>::value_input_t, typename Types<K>::key_iterator_t,
    typename Types<K>::value_iterator_t, typename Types<K>::offset_t, typename Types<K>::compare_t,
    typename Types<K>::key_t, typename Types<K>::value_t>;

template <typename K>
using Dispatch = cub::DispatchMergeSort<
    typename Types<K>::key_input_t, typename Types<K>::value_input_t, typename Types<K>::key_iterator_t,
    typename Types<K>::value_iterator_t, typename Types<K>::offset_t, typename Types<K>::compare_t,
    typename Types<K>::policy_hub, MergeSortSource, detail::LauncherFactory, VSMem<K>>;

template <typename K>
std::string spec() { return std::string("merge_sort_pairs_") + detail::type_suffix<K>(); }

struct Kernels {
  const Kernel& block_sort;
  const Kernel& partition;
  const Kernel& merge;
};

// One CUB dispatch, as cub::DeviceMergeSort::SortPairs makes it (keys and values are both the input and
// the output): sizes the storage when temp.data is null, runs otherwise.
template <typename K>
std::size_t dispatch(CUdevice device, Kernels kernels, K* keys, std::int32_t* values, std::size_t n,
                     TempStorage temp, CUstream stream) {
  using T = Types<K>;
  const auto count = detail::checked_count(n, "merge_sort_pairs");
  detail::LaunchStatus status;
  detail::LauncherFactory factory(device, kernels.block_sort.provenance.arch, &status);
  auto* k = reinterpret_cast<typename T::key_t*>(keys);
  auto* v = reinterpret_cast<typename T::value_t*>(values);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = Dispatch<K>::Dispatch(
      temp.data, bytes, k, v, k, v, count, typename T::compare_t{}, stream,
      MergeSortSource{detail::ref(kernels.block_sort), detail::ref(kernels.partition), detail::ref(kernels.merge)},
      factory, detail::RuntimePolicy<typename T::max_policy>{});
  detail::check_dispatch(returned, status, spec<K>());
  return bytes;
}

// Reads a policy's tile the way DispatchMergeSort::Invoke does.
template <typename K>
struct MergeSortTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    auto policy = cub::detail::merge_sort::MakeMergeSortPolicyWrapper(Policy{});
    items = std::size_t(VSMem<K>::ItemsPerTile(policy.MergeSort()));
    return cudaSuccess;
  }
};

}  // namespace

template <typename K>
MergeSortPairs<K>::MergeSortPairs(Registry& registry)
    : registry_(&registry),
      device_(detail::device_of(registry)),
      block_sort_(registry.get(spec<K>() + "_block_sort")),
      partition_(registry.get(spec<K>() + "_partition")),
      merge_(registry.get(spec<K>() + "_merge")) {}

template <typename K>
std::size_t MergeSortPairs<K>::tile_items() const {
  MergeSortTile<K> tile;
  detail::RuntimePolicy<typename Types<K>::max_policy>::Invoke(int(block_sort_.provenance.arch) * 10, tile);
  return tile.items;
}

template <typename K>
std::size_t MergeSortPairs<K>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  return dispatch<K>(device_, {block_sort_, partition_, merge_}, nullptr, nullptr, n, {}, nullptr);
}

template <typename K>
void MergeSortPairs<K>::operator()(K* keys, value_type* values, std::size_t n, TempStorage temp,
                                   CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const Kernels kernels{block_sort_, partition_, merge_};
  detail::check_temp(temp, dispatch<K>(device_, kernels, keys, values, n, {}, stream), "merge_sort_pairs");
  dispatch<K>(device_, kernels, keys, values, n, temp, stream);
}

template <typename K>
void MergeSortPairs<K>::operator()(K* keys, value_type* values, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const Kernels kernels{block_sort_, partition_, merge_};
  const std::size_t bytes = dispatch<K>(device_, kernels, keys, values, n, {}, stream);
  dispatch<K>(device_, kernels, keys, values, n, workspace_.reserve(bytes), stream);
}

template <typename K>
void merge_sort_pairs(K* keys, std::int32_t* values, std::size_t n, CUstream stream) {
  static const MergeSortPairs<K> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(keys, values, n, temp.storage(), stream);
}

template class MergeSortPairs<std::uint64_t>;
template void merge_sort_pairs(std::uint64_t*, std::int32_t*, std::size_t, CUstream);

}  // namespace kiln::prim
