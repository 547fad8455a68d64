// SortedSearch<T, Side>: one binary search per needle through CUB's for-each kernel from the
// registry.
//
// CCCL 3.0.1 has no device-wide binary search and its for-each dispatch takes no KernelSource, so this is
// cub::detail::for_each::dispatch_t<unsigned, search_op>::Invoke(true_type) (cub/device/dispatch/
// dispatch_for.cuh:126-166), what cub::DeviceFor::Bulk(num_needles, op) runs (device_for.cuh:578-584): the
// static-block-size kernel, the policy of CUB's for-each policy hub (walked by RuntimePolicy), one block of
// block_threads per tile of block_threads * items_per_thread needles, no launch for zero needles.
#include <kiln/prim/search.hpp>

#include <kiln/prim/detail/cub_launch.cuh>

#include <kiln_prim/search.cuh>

#include "one_shot.hpp"

#include <string>

namespace kiln::prim {
namespace {

template <typename T, Side S>
using Types = kiln_prim::binary_search<detail::kernel_t<T>, S == Side::upper>;

template <typename T, Side S>
std::string spec() {
  return std::string(S == Side::lower ? "lower_bound_" : "upper_bound_") + detail::type_suffix<T>();
}

// dispatch_t::Invoke<ActivePolicyT>(true_type), with kiln's launcher.
template <typename T, Side S>
struct SearchPass {
  using offset_t = typename Types<T, S>::offset_t;
  offset_t num_items;
  typename Types<T, S>::op_t op;
  CUstream stream;
  const detail::LauncherFactory& launcher_factory;
  detail::KernelRef kernel;

  template <typename ActivePolicyT>
  cudaError_t Invoke() {
    static_assert(ActivePolicyT::for_policy_t::block_threads > 0,
                  "the registry holds the static-block-size kernel (DeviceFor's dispatch_t picks it then)");
    if (num_items == 0) return cudaSuccess;
    constexpr int block_threads = ActivePolicyT::for_policy_t::block_threads;
    constexpr int items_per_thread = ActivePolicyT::for_policy_t::items_per_thread;
    // In 64 bits: CUB's unsigned ceil_div would wrap within one tile of 2^32.
    const std::size_t tile_size = std::size_t(block_threads) * items_per_thread;
    const std::size_t num_tiles = (std::size_t(num_items) + tile_size - 1) / tile_size;
    return launcher_factory(dim3(static_cast<unsigned int>(num_tiles)), dim3(static_cast<unsigned int>(block_threads)),
                            0, stream)
        .doit(kernel, num_items, op);
  }
};

struct SearchTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    items = std::size_t(Policy::for_policy_t::block_threads) * std::size_t(Policy::for_policy_t::items_per_thread);
    return cudaSuccess;
  }
};

}  // namespace

template <typename T, Side S>
SortedSearch<T, S>::SortedSearch(Registry& registry)
    : PlanBase(registry, spec<T, S>()), kernel_(registry.get(unit_ + "_for_each")) {}

template <typename T, Side S>
std::size_t SortedSearch<T, S>::tile_items() const {
  SearchTile tile;
  detail::RuntimePolicy<typename Types<T, S>::max_policy>::Invoke(int(kernel_.provenance.arch) * 10, tile);
  return tile.items;
}

template <typename T, Side S>
void SortedSearch<T, S>::operator()(const T* haystack, std::size_t haystack_size, const T* needles,
                                    std::int64_t* out, std::size_t num_needles, CUstream stream) const {
  using K = detail::kernel_t<T>;
  const unsigned int hay = detail::checked_count(haystack_size, unit_.c_str());
  const unsigned int count = detail::checked_count(num_needles, unit_.c_str());
  detail::ContextScope scope(*registry_);
  detail::LaunchStatus status;
  detail::LauncherFactory factory(device_, kernel_.provenance.arch, &status);
  SearchPass<T, S> pass{count,
                        {reinterpret_cast<const K*>(haystack), hay, reinterpret_cast<const K*>(needles),
                         reinterpret_cast<long long*>(out)},
                        stream,
                        factory,
                        detail::ref(kernel_)};
  const cudaError_t returned =
      detail::RuntimePolicy<typename Types<T, S>::max_policy>::Invoke(int(kernel_.provenance.arch) * 10, pass);
  detail::check_dispatch(returned, status, unit_);
}

template <typename T>
void lower_bound(const T* haystack, std::size_t haystack_size, const T* needles, std::int64_t* out,
                 std::size_t num_needles, CUstream stream) {
  static detail::OneShot<LowerBound<T>> plans;
  plans.plan(detail::one_shot_device(stream))(haystack, haystack_size, needles, out, num_needles, stream);
}

template <typename T>
void upper_bound(const T* haystack, std::size_t haystack_size, const T* needles, std::int64_t* out,
                 std::size_t num_needles, CUstream stream) {
  static detail::OneShot<UpperBound<T>> plans;
  plans.plan(detail::one_shot_device(stream))(haystack, haystack_size, needles, out, num_needles, stream);
}

// Per row of kernels/primitives.toml (kiln/prim/plan_types.hpp): the plan and its one-shot function.
#define KILN_PRIM_INSTANTIATE(T, S) \
  template class SortedSearch<T, Side::S>; \
  template void S##_bound(const T*, std::size_t, const T*, std::int64_t*, std::size_t, CUstream);
KILN_PRIM_SORTED_SEARCH_TYPES(KILN_PRIM_INSTANTIATE)
#undef KILN_PRIM_INSTANTIATE

}  // namespace kiln::prim
