// detail::FixedPlan's members (kiln/prim/detail/plan.hpp), for the .cu files that instantiate fixed plans.
#pragma once

#include <kiln/prim/detail/plan.hpp>

#include <memory>

namespace kiln::prim::detail {

template <typename Open>
FixedPlan<Open>::FixedPlan(Registry& registry) : open_(std::make_unique<Open>(registry)) {}
template <typename Open>
FixedPlan<Open>::FixedPlan(FixedPlan&&) noexcept = default;
template <typename Open>
FixedPlan<Open>& FixedPlan<Open>::operator=(FixedPlan&&) noexcept = default;
template <typename Open>
FixedPlan<Open>::~FixedPlan() = default;

template <typename Open>
std::size_t FixedPlan<Open>::temp_bytes(std::size_t n) const { return open_->temp_bytes(n); }
template <typename Open>
std::size_t FixedPlan<Open>::tile_items() const { return open_->tile_items(); }
template <typename Open>
const Kernel& FixedPlan<Open>::kernel() const { return open_->kernel(); }

}  // namespace kiln::prim::detail
