// Unique<K, V, Equal, KeysIn, ValuesIn>: CUB's DispatchUniqueByKey on the kernels of a kiln.unique_by_key row of any registry.
// Header-only; include it from a .cu file nvcc compiles (CUB's host dispatch does not compile with g++),
// with kiln's primitive headers on the include path (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/unique_by_key.cuh>

// DispatchUniqueByKey through device_select.cuh, not its own header: CCCL 3.0.1's
// dispatch_unique_by_key.cuh has no include guard, so a file that includes this plan and
// cub/device/device_select.cuh (which includes it) would define it twice.
#include <cub/device/device_select.cuh>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::prim {
namespace detail {

// DeviceUniqueByKeyKernelSource (dispatch_unique_by_key.cuh) with the registry's kernels.
template <typename Types>
struct UniqueSource {
  KernelRef init, sweep;
  KernelRef CompactInitKernel() const { return init; }
  KernelRef UniqueByKeySweepKernel() const { return sweep; }
  typename Types::tile_state TileState() const { return {}; }
};

template <typename Types>
using UniqueDispatch = cub::DispatchUniqueByKey<
    typename Types::key_input_t, typename Types::value_input_t, typename Types::key_output_t,
    typename Types::value_output_t, typename Types::num_selected_t, typename Types::equality_t,
    typename Types::offset_t, typename Types::policy_hub, UniqueSource<Types>, LauncherFactory>;

// One CUB dispatch, as cub::DeviceSelect::UniqueByKey makes it with int counts: sizes the storage when
// temp.data is null, runs otherwise. `name` names the unit in errors.
template <typename Types>
std::size_t unique_dispatch(CUdevice device, const Kernel& init, const Kernel& sweep,
                            typename Types::key_input_t keys_in, typename Types::value_input_t values_in,
                            typename Types::key_output_t keys_out, typename Types::value_output_t values_out,
                            typename Types::num_selected_t num_selected, std::size_t n,
                            typename Types::equality_t equal, TempStorage temp, CUstream stream,
                            const std::string& name) {
  const auto count = checked_count(n, name.c_str());
  LaunchStatus status;
  LauncherFactory factory(device, sweep.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = UniqueDispatch<Types>::Dispatch(
      temp.data, bytes, keys_in, values_in, keys_out, values_out, num_selected, equal, count, stream,
      UniqueSource<Types>{ref(init), ref(sweep)}, factory, RuntimePolicy<typename Types::max_policy>{});
  check_dispatch(returned, status, name);
  return bytes;
}

// Reads a policy's tile the way DispatchUniqueByKey::Invoke does (block threads × items per thread, after
// CUB's fallback for agents that would not fit shared memory).
template <typename Types>
struct UniqueTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    using T = Types;
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

template <typename Types>
std::size_t unique_tile_items(const Kernel& sweep) {
  UniqueTile<Types> tile;
  RuntimePolicy<typename Types::max_policy>::Invoke(int(sweep.provenance.arch) * 10, tile);
  return tile.items;
}

}  // namespace detail

// Of each run of consecutive keys that `equal` says are equal in keys_in[0, n), copies the first key and
// the value that came with it to keys_out and values_out, compacted in input order, and writes the number
// of runs to *num_selected (cub::DeviceSelect::UniqueByKey). No range may overlap another. The registry's
// unit must be a kiln.unique_by_key row with params K, V, Equal, KeysIn and ValuesIn naming these same
// types. KeysIn, ValuesIn: the input iterators (kiln_prim/iterators.cuh), void for const K* and const V*.
template <typename K, typename V, typename Equal, typename KeysIn = void, typename ValuesIn = void>
class Unique : detail::PlanBase {
  using Types = kiln_prim::unique_by_key<K, V, Equal, KeysIn, ValuesIn>;

 public:
  using count_type = unsigned long long;  // the kernels' count, std::uint64_t's representation
  using keys_input_type = typename Types::key_input_t;      // const K*, or KeysIn
  using values_input_type = typename Types::value_input_t;  // const V*, or ValuesIn

  // `link`: the unit is a linked row, and this is the equality linked into it (kiln/prim/operator.hpp).
  Unique(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        init_(detail::get_kernel(registry, unit_ + "_init", link)),
        sweep_(detail::get_kernel(registry, unit_ + "_sweep", link)) {}

  // Temporary storage a call with n items needs.
  std::size_t temp_bytes(std::size_t n) const {
    return sized(dispatch(keys_input_type{}, values_input_type{}, nullptr, nullptr, nullptr, n, {}, nullptr));
  }

  // Thread-safe: a plan's const calls only read it.
  void operator()(keys_input_type keys_in, values_input_type values_in, K* keys_out, V* values_out, count_type* num_selected,
                  std::size_t n, TempStorage temp, CUstream stream = nullptr, Equal equal = {}) const {
    run(temp, dispatch(keys_in, values_in, keys_out, values_out, num_selected, n, equal, stream));
  }
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(keys_input_type keys_in, values_input_type values_in, K* keys_out, V* values_out, count_type* num_selected,
                  std::size_t n, CUstream stream = nullptr, Equal equal = {}) {
    run(dispatch(keys_in, values_in, keys_out, values_out, num_selected, n, equal, stream));
  }

  // Items per tile of the sweep kernel under the policy for the loaded binary's architecture.
  std::size_t tile_items() const { return detail::unique_tile_items<Types>(sweep_); }

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary: the sweep kernel.
  const Kernel& kernel() const { return sweep_; }

 private:
  // The dispatch of one call, for PlanBase::run.
  auto dispatch(keys_input_type keys_in, values_input_type values_in, K* keys_out, V* values_out,
                count_type* num_selected, std::size_t n, Equal equal, CUstream stream) const {
    return [=, this](TempStorage temp) {
      return detail::unique_dispatch<Types>(device_, init_, sweep_, keys_in, values_in, keys_out, values_out,
                                            num_selected, n, equal, temp, stream, unit_);
    };
  }

  Kernel init_, sweep_;
};

}  // namespace kiln::prim
