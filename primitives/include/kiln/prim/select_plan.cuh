// SelectIf<T, Pred, In>: CUB's select-if kernels of a kiln.select_if row of any registry, run as
// cub::DeviceSelect::If runs them. Header-only; include it from a .cu file nvcc compiles (CUB's host
// dispatch does not compile with g++), with kiln's primitive headers on the include path
// (dependency('kiln_prim_headers')).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/detail/select_launch.cuh>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::prim {

// Writes to out[0, k) the items in[i] for which pred(in[i]) is true, in their input order, and k to *count
// (cub::DeviceSelect::If). in, out and count are device pointers; out needs room for k items (n at most)
// and must not overlap in. The registry's unit must be a kiln.select_if row with params T, Pred and In
// naming these same types. In: the input iterator (kiln_prim/iterators.cuh), void for const T*. n up to
// 2^32 - 1.
template <typename T, typename Pred, typename In = void>
class SelectIf : detail::PlanBase {
  using Types = kiln_prim::select_if<T, Pred, In>;

 public:
  using count_type = long long;  // the kernels' count, std::int64_t's representation
  using input_type = typename Types::input_t;  // const T*, or In

  // `link`: the unit is a linked row, and this is the predicate linked into it (kiln/prim/operator.hpp).
  SelectIf(Registry& registry, std::string_view unit, const LinkedSource* link = nullptr)
      : PlanBase(registry, unit),
        init_(detail::get_kernel(registry, unit_ + "_init", link)),
        sweep_(detail::get_kernel(registry, unit_ + "_sweep", link)) {}

  // Temporary storage a call with n items needs.
  std::size_t temp_bytes(std::size_t n) const { return sized(dispatch(input_type{}, nullptr, nullptr, n, {}, nullptr)); }

  // Thread-safe: a plan's const calls only read it.
  void operator()(input_type in, T* out, count_type* count, std::size_t n, TempStorage temp, CUstream stream = nullptr,
                  Pred pred = {}) const {
    run(temp, dispatch(in, out, count, n, pred, stream));
  }
  // With storage the plan owns (allocated only when n outgrows it).
  void operator()(input_type in, T* out, count_type* count, std::size_t n, CUstream stream = nullptr, Pred pred = {}) {
    run(dispatch(in, out, count, n, pred, stream));
  }

  // Items per tile of the sweep kernel under the policy for the loaded binary's architecture.
  std::size_t tile_items() const { return detail::select_tile_items<Types>(sweep_); }

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary: the sweep kernel.
  const Kernel& kernel() const { return sweep_; }

 private:
  // The dispatch of one call, for PlanBase::run.
  auto dispatch(input_type in, T* out, count_type* count, std::size_t n, Pred pred, CUstream stream) const {
    return [=, this](TempStorage temp) {
      return detail::select_dispatch<Types>(device_, init_, sweep_, in, nullptr, out, count,
                                            static_cast<long long>(detail::checked_count(n, unit_.c_str())), pred,
                                            temp, stream, unit_);
    };
  }

  Kernel init_, sweep_;
};

}  // namespace kiln::prim
