// UniqueByKey<K>: CUB's DispatchUniqueByKey on the registry's unique_by_key_<K> kernels.
#include <kiln/prim/unique_by_key.hpp>

#include <kiln/prim/detail/cub_launch.cuh>
#include "stream_temp.cuh"

#include <kiln_prim/unique_by_key.cuh>

#include <cub/device/dispatch/dispatch_unique_by_key.cuh>

#include <string>

namespace kiln::prim {
namespace {

template <typename K>
using Types = kiln_prim::unique_by_key<detail::kernel_t<K>, int>;

template <typename K>
struct UniqueSource {
  detail::KernelRef init, sweep;
  detail::KernelRef CompactInitKernel() const { return init; }
  detail::KernelRef UniqueByKeySweepKernel() const { return sweep; }
  typename Types<K>::tile_state TileState() const { return {}; }
};

template <typename K>
using Dispatch = cub::DispatchUniqueByKey<
    typename Types<K>::key_input_t, typename Types<K>::value_input_t, typename Types<K>::key_output_t,
    typename Types<K>::value_output_t, typename Types<K>::num_selected_t, typename Types<K>::equality_t,
    typename Types<K>::offset_t, typename Types<K>::policy_hub, UniqueSource<K>, detail::LauncherFactory>;

template <typename K>
std::string spec() { return std::string("unique_by_key_") + detail::type_suffix<K>(); }

struct Args {
  const void* keys_in;
  const void* values_in;
  void* keys_out;
  void* values_out;
  std::uint64_t* num_selected;
};

// One CUB dispatch, as cub::DeviceSelect::UniqueByKey makes it with int counts: sizes the storage when
// temp.data is null, runs otherwise.
template <typename K>
std::size_t dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, Args a, std::size_t n,
                     TempStorage temp, CUstream stream) {
  using T = Types<K>;
  const auto count = detail::checked_count(n, "unique_by_key");
  detail::LaunchStatus status;
  detail::LauncherFactory factory(device, sweep.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = Dispatch<K>::Dispatch(
      temp.data, bytes, static_cast<typename T::key_input_t>(a.keys_in),
      static_cast<typename T::value_input_t>(a.values_in), static_cast<typename T::key_output_t>(a.keys_out),
      static_cast<typename T::value_output_t>(a.values_out),
      reinterpret_cast<typename T::num_selected_t>(a.num_selected), typename T::equality_t{}, count, stream,
      UniqueSource<K>{detail::ref(init), detail::ref(sweep)}, factory,
      detail::RuntimePolicy<typename T::max_policy>{});
  detail::check_dispatch(returned, status, spec<K>());
  return bytes;
}

// Reads a policy's tile the way DispatchUniqueByKey::Invoke does (block threads × items per thread, after
// CUB's fallback for agents that would not fit shared memory).
template <typename K>
struct UniqueTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    using T = Types<K>;
    auto policy = cub::detail::unique_by_key::MakeUniqueByKeyPolicyWrapper(Policy{});
    using Wrapped = decltype(policy);
    using Helper = cub::detail::unique_by_key::VSMemHelper;
    const int threads = Helper::template BlockThreads<
        typename Wrapped::UniqueByKeyPolicyT, typename T::key_input_t, typename T::value_input_t,
        typename T::key_output_t, typename T::value_output_t, typename T::equality_t, typename T::offset_t>(
        policy.UniqueByKey());
    const int per_thread = Helper::template ItemsPerThread<
        typename Wrapped::UniqueByKeyPolicyT, typename T::key_input_t, typename T::value_input_t,
        typename T::key_output_t, typename T::value_output_t, typename T::equality_t, typename T::offset_t>(
        policy.UniqueByKey());
    items = std::size_t(threads) * std::size_t(per_thread);
    return cudaSuccess;
  }
};

}  // namespace

template <typename K>
UniqueByKey<K>::UniqueByKey(Registry& registry)
    : registry_(&registry),
      device_(detail::device_of(registry)),
      init_(registry.get(spec<K>() + "_init")),
      sweep_(registry.get(spec<K>() + "_sweep")) {}

template <typename K>
std::size_t UniqueByKey<K>::tile_items() const {
  UniqueTile<K> tile;
  detail::RuntimePolicy<typename Types<K>::max_policy>::Invoke(int(sweep_.provenance.arch) * 10, tile);
  return tile.items;
}

template <typename K>
std::size_t UniqueByKey<K>::temp_bytes(std::size_t n) const {
  detail::ContextScope scope(*registry_);
  return dispatch<K>(device_, init_, sweep_, {}, n, {}, nullptr);
}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, TempStorage temp, CUstream stream) const {
  detail::ContextScope scope(*registry_);
  const Args args{keys_in, values_in, keys_out, values_out, num_selected};
  detail::check_temp(temp, dispatch<K>(device_, init_, sweep_, args, n, {}, stream), "unique_by_key");
  dispatch<K>(device_, init_, sweep_, args, n, temp, stream);
}

template <typename K>
void UniqueByKey<K>::operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                                std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  detail::ContextScope scope(*registry_);
  const Args args{keys_in, values_in, keys_out, values_out, num_selected};
  const std::size_t bytes = dispatch<K>(device_, init_, sweep_, args, n, {}, stream);
  dispatch<K>(device_, init_, sweep_, args, n, workspace_.reserve(bytes), stream);
}

template <typename K>
void unique_by_key(const K* keys_in, const std::int32_t* values_in, K* keys_out, std::int32_t* values_out,
                   std::uint64_t* num_selected, std::size_t n, CUstream stream) {
  static const UniqueByKey<K> plan;
  detail::ContextScope scope(registry());
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(keys_in, values_in, keys_out, values_out, num_selected, n, temp.storage(), stream);
}

template class UniqueByKey<std::int32_t>;
template class UniqueByKey<std::uint64_t>;
template void unique_by_key(const std::int32_t*, const std::int32_t*, std::int32_t*, std::int32_t*, std::uint64_t*,
                            std::size_t, CUstream);
template void unique_by_key(const std::uint64_t*, const std::int32_t*, std::uint64_t*, std::int32_t*,
                            std::uint64_t*, std::size_t, CUstream);

}  // namespace kiln::prim
