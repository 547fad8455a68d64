// ExclusiveScan<T, Op> and InclusiveScan<T, Op>: CUB's DispatchScan on the kernels of a kiln.exclusive_scan
// or kiln.inclusive_scan row of any registry. Header-only; include it from a .cu file nvcc compiles (CUB's
// host dispatch does not compile with g++), with kiln's primitive headers on the include path
// (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/scan.cuh>

#include <cub/device/dispatch/dispatch_scan.cuh>

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::prim {
namespace detail {

// DeviceScanKernelSource (dispatch_scan.cuh) with the registry's kernels.
template <typename Types>
struct ScanSource {
  KernelRef init, sweep;
  KernelRef InitKernel() const { return init; }
  KernelRef ScanKernel() const { return sweep; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types::accum_t); }
  typename Types::tile_state TileState() const { return {}; }
};

template <typename Types>
using ScanDispatch = cub::DispatchScan<typename Types::input_t, typename Types::output_t, typename Types::op_t,
                                       typename Types::init_t, typename Types::offset_t, typename Types::accum_t,
                                       cub::ForceInclusive::No, typename Types::policy_hub, ScanSource<Types>,
                                       LauncherFactory>;

// One CUB dispatch: sizes the storage when temp.data is null, runs otherwise. `name` names the unit in errors.
template <typename Types>
std::size_t scan_dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, typename Types::input_t in,
                          typename Types::output_t out, std::size_t n, typename Types::op_t op,
                          typename Types::init_t init_value, TempStorage temp, CUstream stream,
                          const std::string& name) {
  const auto count = checked_count(n, name.c_str());
  LaunchStatus status;
  LauncherFactory factory(device, sweep.provenance.arch, &status);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = ScanDispatch<Types>::Dispatch(
      temp.data, bytes, in, out, op, init_value, count, stream, ScanSource<Types>{ref(init), ref(sweep)}, factory,
      RuntimePolicy<typename Types::max_policy>{});
  check_dispatch(returned, status, name);
  return bytes;
}

// Reads a policy's tile the way DispatchScan does.
struct ScanTile {
  std::size_t items = 0;
  template <typename Policy>
  cudaError_t Invoke() {
    auto policy = cub::detail::scan::MakeScanPolicyWrapper(Policy{});
    items = std::size_t(policy.Scan().BlockThreads()) * std::size_t(policy.Scan().ItemsPerThread());
    return cudaSuccess;
  }
};

template <typename Types>
std::size_t scan_tile_items(const Kernel& sweep) {
  ScanTile tile;
  RuntimePolicy<typename Types::max_policy>::Invoke(int(sweep.provenance.arch) * 10, tile);
  return tile.items;
}

// What ExclusiveScan and InclusiveScan share: the unit's two kernels (<unit>_init, <unit>_sweep), sizing,
// and a call with caller or owned storage.
template <typename Types>
class ScanPlan : protected PlanBase {
 public:
  using value_type = typename Types::value_t;
  using input_type = typename Types::input_t;  // const T*, or the row's In

  // `link`: the unit is a linked row, and this is the operator linked into it (kiln/prim/operator.hpp).
  ScanPlan(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        init_(get_kernel(registry, unit_ + "_init", link)),
        sweep_(get_kernel(registry, unit_ + "_sweep", link)) {}

  // Temporary storage a call with n items needs.
  std::size_t temp_bytes(std::size_t n) const {
    return sized(dispatch(input_type{}, nullptr, n, {}, init_value(), nullptr));
  }

  // Items per tile of the sweep kernel under the policy for the loaded binary's architecture.
  std::size_t tile_items() const { return scan_tile_items<Types>(sweep_); }

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary.
  const Kernel& kernel() const { return sweep_; }

 protected:
  using init_t = typename Types::init_t;

  static init_t init_value() {
    if constexpr (std::is_same_v<init_t, cub::NullType>) return {};
    else return init_t(typename Types::init_value_t{});
  }

  // The dispatch of one call, for PlanBase::run.
  auto dispatch(input_type in, value_type* out, std::size_t n, typename Types::op_t op, init_t init,
                CUstream stream) const {
    return [=, this](TempStorage temp) {
      return scan_dispatch<Types>(device_, init_, sweep_, in, out, n, op, init, temp, stream, unit_);
    };
  }

 private:
  Kernel init_, sweep_;
};

}  // namespace detail

// out[0] = init, out[i] = op(out[i-1], in[i-1]), in CUB's order (cub::DeviceScan::ExclusiveScan). The
// registry's unit must be a kiln.exclusive_scan row with params T, Op and In naming these same types. In:
// the input iterator (kiln_prim/iterators.cuh), void for const T*. In place (in == out) is allowed.
template <typename T, typename Op, typename In = void>
class ExclusiveScan : public detail::ScanPlan<kiln_prim::exclusive_scan<T, Op, In>> {
  using Base = detail::ScanPlan<kiln_prim::exclusive_scan<T, Op, In>>;

 public:
  ExclusiveScan(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : Base(registry, unit, link) {}

  // Thread-safe: a plan's const calls only read it.
  void operator()(typename Base::input_type in, T* out, std::size_t n, T init, TempStorage temp,
                  CUstream stream = nullptr, Op op = {}) const {
    this->run(temp, this->dispatch(in, out, n, op, typename Base::init_t(init), stream));
  }
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(typename Base::input_type in, T* out, std::size_t n, T init, CUstream stream = nullptr,
                  Op op = {}) {
    this->run(this->dispatch(in, out, n, op, typename Base::init_t(init), stream));
  }
};

// out[0] = in[0], out[i] = op(out[i-1], in[i]), in CUB's order (cub::DeviceScan::InclusiveScan). The
// registry's unit must be a kiln.inclusive_scan row with params T, Op and In naming these same types.
template <typename T, typename Op, typename In = void>
class InclusiveScan : public detail::ScanPlan<kiln_prim::inclusive_scan<T, Op, In>> {
  using Base = detail::ScanPlan<kiln_prim::inclusive_scan<T, Op, In>>;

 public:
  InclusiveScan(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : Base(registry, unit, link) {}

  void operator()(typename Base::input_type in, T* out, std::size_t n, TempStorage temp,
                  CUstream stream = nullptr, Op op = {}) const {
    this->run(temp, this->dispatch(in, out, n, op, {}, stream));
  }
  void operator()(typename Base::input_type in, T* out, std::size_t n, CUstream stream = nullptr, Op op = {}) {
    this->run(this->dispatch(in, out, n, op, {}, stream));
  }
};

}  // namespace kiln::prim
