// SelectIndices<I>: CUB's select-by-flags kernels from the registry, run the way DispatchSelectIf runs them
// (kiln/prim/detail/select_launch.cuh) for cub::DeviceSelect::Flagged(counting iterator, mask, out,
// num_selected, n).
#include <kiln/error.hpp>
#include <kiln/prim/select.hpp>

#include <kiln/prim/detail/select_launch.cuh>
#include "one_shot.hpp"
#include "stream_temp.cuh"

#include <limits>
#include <stdexcept>
#include <string>

namespace kiln::prim {
namespace {

template <typename I>
using Types = kiln_prim::select_indices<detail::kernel_t<I>>;

template <typename I>
std::string spec() { return std::string("select_") + detail::type_suffix<I>(); }

// Every index (n - 1) and the count (n) must fit I; CUB's own limit is int64, kiln's is 2^32 - 1.
template <typename I>
std::int64_t checked_items(std::size_t n) {
  if (n > std::size_t(std::numeric_limits<I>::max())) {
    throw kiln::Error(kiln::Errc::invalid_argument, "kiln::prim::" + spec<I>() + ": " + std::to_string(n) +
                            " items is more than the index type can count");
  }
  return std::int64_t(detail::checked_count(n, "select_indices"));
}

// One dispatch (detail::select_dispatch, as cub::DeviceSelect::Flagged over counting_iterator<I>{0}).
template <typename I>
std::size_t dispatch(CUdevice device, const Kernel& init, const Kernel& sweep, const std::uint8_t* mask, I* out,
                     I* count, std::size_t n, TempStorage temp, CUstream stream) {
  using K = detail::kernel_t<I>;
  return detail::select_dispatch<Types<I>>(device, init, sweep, typename Types<I>::input_t{K{0}}, mask,
                                           reinterpret_cast<K*>(out), reinterpret_cast<K*>(count),
                                           checked_items<I>(n), {}, temp, stream, spec<I>());
}

}  // namespace

template <typename I>
std::size_t SelectIndices<I>::tile_items() const {
  return detail::select_tile_items<Types<I>>(sweep_);
}

template <typename I>
SelectIndices<I>::SelectIndices(Registry& registry)
    : PlanBase(registry, spec<I>()),
      init_(registry.get(spec<I>() + "_init")),
      sweep_(registry.get(spec<I>() + "_sweep")) {}

template <typename I>
std::size_t SelectIndices<I>::temp_bytes(std::size_t n) const {
  return sized(
      [&](TempStorage t) { return dispatch<I>(device_, init_, sweep_, nullptr, nullptr, nullptr, n, t, nullptr); });
}

template <typename I>
void SelectIndices<I>::operator()(const std::uint8_t* mask, I* out, I* count, std::size_t n, TempStorage temp,
                                  CUstream stream) const {
  run(temp, [&](TempStorage t) { return dispatch<I>(device_, init_, sweep_, mask, out, count, n, t, stream); });
}

template <typename I>
void SelectIndices<I>::operator()(const std::uint8_t* mask, I* out, I* count, std::size_t n, CUstream stream) {
  run([&](TempStorage t) { return dispatch<I>(device_, init_, sweep_, mask, out, count, n, t, stream); });
}

template <typename I>
void select_indices(const std::uint8_t* mask, I* out, I* count, std::size_t n, CUstream stream) {
  static detail::OneShot<SelectIndices<I>> plans;
  const int device = detail::one_shot_device(stream);
  const SelectIndices<I>& plan = plans.plan(device);
  detail::ContextScope scope(registry(device));
  const std::size_t bytes = plan.temp_bytes(n);
  detail::StreamTemp temp(bytes, stream);
  plan(mask, out, count, n, temp.storage(), stream);
}

// One of each per row of kernels/primitives.toml (kiln/prim/plan_types.hpp), kind by kind: the order
// nvcc instantiates them in decides which steps of CUB's policy walk it keeps out of line.
#define KILN_PRIM_PLAN(I) template class SelectIndices<I>;
#define KILN_PRIM_ONE_SHOT(I) template void select_indices(const std::uint8_t*, I*, I*, std::size_t, CUstream);
KILN_PRIM_SELECT_INDICES_TYPES(KILN_PRIM_PLAN)
KILN_PRIM_SELECT_INDICES_TYPES(KILN_PRIM_ONE_SHOT)
#undef KILN_PRIM_PLAN
#undef KILN_PRIM_ONE_SHOT

}  // namespace kiln::prim
