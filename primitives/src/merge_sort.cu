// MergeSortPairs<K>: CUB's DispatchMergeSort on the registry's merge_sort_pairs_<K> kernels.
#include <kiln/prim/merge_sort.hpp>

#include <kiln/prim/merge_sort_plan.cuh>

#include "stream_temp.cuh"

#include <string>

namespace kiln::prim {
namespace {

// The comparator of the merge_sort_pairs_<K> rows (kernels/primitives.toml, param Compare).
using Less = ::cuda::std::less<>;

template <typename K>
using Types = kiln_prim::merge_sort_pairs<detail::kernel_t<K>, int, Less>;

template <typename K>
std::string spec() { return std::string("merge_sort_pairs_") + detail::type_suffix<K>(); }

struct Kernels {
  const Kernel& block_sort;
  const Kernel& partition;
  const Kernel& merge;
};

// One CUB dispatch (detail::merge_sort_dispatch, as MergeSort<K, int, less> runs it).
template <typename K>
std::size_t dispatch(CUdevice device, Kernels kernels, K* keys, std::int32_t* values, std::size_t n,
                     TempStorage temp, CUstream stream) {
  using T = Types<K>;
  auto* k = reinterpret_cast<typename T::key_t*>(keys);
  auto* v = reinterpret_cast<typename T::value_t*>(values);
  return detail::merge_sort_dispatch<T>(device, kernels.block_sort, kernels.partition, kernels.merge, k, v, k, v, n,
                                        Less{}, temp, stream, spec<K>());
}

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
  return detail::merge_sort_tile_items<Types<K>>(block_sort_);
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
