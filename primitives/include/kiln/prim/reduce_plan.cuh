// Reduce<T, Op>: CUB's DispatchReduce on the kernels of a kiln.reduce row of any registry. Header-only;
// include it from a .cu file nvcc compiles (CUB's host dispatch does not compile with g++), with kiln's
// primitive headers on the include path (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/cub_launch.cuh>
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/detail/reduce_launch.cuh>
#include <kiln/prim/storage.hpp>

#include <kiln_prim/reduce.cuh>

#include <cub/device/dispatch/dispatch_reduce.cuh>

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::prim {
namespace detail {

// DeviceReduceKernelSource (dispatch_reduce.cuh) with the registry's kernels.
template <typename Types>
struct ReduceSource {
  KernelRef single_tile, sweep, final_pass;
  KernelRef SingleTileKernel() const { return single_tile; }
  KernelRef ReductionKernel() const { return sweep; }
  KernelRef SingleTileSecondKernel() const { return final_pass; }
  static constexpr std::size_t AccumSize() { return sizeof(typename Types::accum_t); }
};

template <typename Types>
using ReduceDispatch =
    cub::DispatchReduce<typename Types::input_t, typename Types::output_t, typename Types::offset_t,
                        typename Types::op_t, typename Types::init_t, typename Types::accum_t,
                        typename Types::transform_t, typename Types::policy_hub, ReduceSource<Types>,
                        AnsweredLauncherFactory>;

// A policy's numbers, read the way DispatchReduce reads them (through MakeReducePolicyWrapper).
struct ReduceTiles {
  std::size_t single_tile_items = 0;  // DispatchReduce::Invoke: at most this many take the single-tile kernel
  int sweep_threads = 0;              // InvokePasses: DeviceReduceKernel's block size
  template <typename ActivePolicy>
  cudaError_t Invoke() {
    auto policy = cub::detail::reduce::MakeReducePolicyWrapper(ActivePolicy{});
    single_tile_items = std::size_t(policy.SingleTile().BlockThreads()) * std::size_t(policy.SingleTile().ItemsPerThread());
    sweep_threads = policy.Reduce().BlockThreads();
    return cudaSuccess;
  }
};

template <typename Types>
ReduceTiles reduce_tiles(const Kernel& sweep) {
  ReduceTiles tiles;
  RuntimePolicy<typename Types::max_policy>::Invoke(int(sweep.provenance.arch) * 10, tiles);
  return tiles;
}

// A unit's three kernels (<unit>_single_tile, <unit>_sweep, <unit>_final) and the device queries CUB's
// dispatch makes on every call, asked once when the plan is built.
struct ReduceKernels {
  Kernel single_tile, sweep, final_pass;
  DeviceAnswers answers;
};

template <typename Types>
ReduceKernels reduce_kernels(Registry& registry, CUdevice device, const std::string& unit,
                             const LinkedSource* link = nullptr) {
  ReduceKernels k{get_kernel(registry, unit + "_single_tile", link), get_kernel(registry, unit + "_sweep", link),
                  get_kernel(registry, unit + "_final", link), {}};
  // The two queries DispatchReduce::InvokePasses makes on every call, made once with the same arguments.
  ContextScope scope(registry);
  LaunchStatus status;
  const LauncherFactory factory(device, k.sweep.provenance.arch, &status);
  k.answers.kernel = k.sweep.launch_handle();
  k.answers.block_threads = reduce_tiles<Types>(k.sweep).sweep_threads;
  factory.MultiProcessorCount(k.answers.sm_count);
  factory.MaxSmOccupancy(k.answers.occupancy, ref(k.sweep), k.answers.block_threads);
  check_dispatch(cudaSuccess, status, unit);
  return k;
}

// One CUB dispatch: sizes the storage when temp.data is null, runs otherwise. `name` names the unit in errors.
template <typename Types>
std::size_t reduce_dispatch(CUdevice device, const ReduceKernels& k, typename Types::input_t in,
                            typename Types::output_t out, std::size_t n, typename Types::op_t op,
                            typename Types::init_t init, TempStorage temp, CUstream stream, const std::string& name) {
  const auto count = checked_count(n, name.c_str());
  LaunchStatus status;
  const AnsweredLauncherFactory factory(LauncherFactory(device, k.sweep.provenance.arch, &status), k.answers);
  std::size_t bytes = temp.bytes;
  const cudaError_t returned = ReduceDispatch<Types>::Dispatch(
      temp.data, bytes, in, out, count, op, init, stream, typename Types::transform_t{},
      ReduceSource<Types>{ref(k.single_tile), ref(k.sweep), ref(k.final_pass)}, factory,
      RuntimePolicy<typename Types::max_policy>{});
  check_dispatch(returned, status, name);
  return bytes;
}

}  // namespace detail

// *out = op(init, in[0], …, in[n-1]) in CUB's tree order (cub::DeviceReduce::Reduce): one value, written to
// device memory; n = 0 writes init. Op must be associative (CUB regroups; it need not commute). The
// registry's unit must be a kiln.reduce row with params T, Op and In naming these same types. In: the
// input iterator (kiln_prim/iterators.cuh), void for const T*.
template <typename T, typename Op, typename In = void>
class Reduce : detail::PlanBase {
  using Types = kiln_prim::reduce<T, Op, In>;

 public:
  using input_type = typename Types::input_t;  // const T*, or In

  // `link`: the unit is a linked row, and this is the operator linked into it (kiln/prim/operator.hpp).
  Reduce(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit), kernels_(detail::reduce_kernels<Types>(registry, device_, unit_, link)) {}

  // Temporary storage a call with n items needs (1 byte when n fits one tile: CUB asks for it, never uses it).
  std::size_t temp_bytes(std::size_t n) const { return sized(dispatch(input_type{}, nullptr, n, {}, T{}, nullptr)); }

  // Thread-safe: a plan's const calls only read it. `out` is one T of device memory, not part of `in`.
  void operator()(input_type in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr,
                  Op op = {}) const {
    run(temp, dispatch(in, out, n, op, init, stream));
  }
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(input_type in, T* out, std::size_t n, T init, CUstream stream = nullptr, Op op = {}) {
    run(dispatch(in, out, n, op, init, stream));
  }

  // The most items the single-tile kernel reduces alone, under the policy for the loaded binary's
  // architecture; more take two passes (per-block partials, then their reduction).
  std::size_t tile_items() const { return detail::reduce_tiles<Types>(kernels_.sweep).single_tile_items; }

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary: the sweep kernel.
  const Kernel& kernel() const { return kernels_.sweep; }

 private:
  auto dispatch(input_type in, T* out, std::size_t n, Op op, T init, CUstream stream) const {
    return [=, this](TempStorage temp) {
      return detail::reduce_dispatch<Types>(device_, kernels_, in, out, n, op, init, temp, stream, unit_);
    };
  }

  detail::ReduceKernels kernels_;
};

}  // namespace kiln::prim
