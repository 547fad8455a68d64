// What every plan of kiln's primitives does around CUB's dispatch: the registry's context made current,
// its device, item counts and caller storage checked, the storage a plan owns (PlanBase); a fixed-type
// plan's open plan behind a pointer (FixedPlan). Header-only (see kiln/prim/storage.hpp).
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/prim/storage.hpp>
#include <kiln/registry.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kiln::prim::detail {

// Makes a registry's context current for the duration of a plan call, and restores the caller's.
class ContextScope {
 public:
  explicit ContextScope(Registry& registry);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
};

// The CUdevice of a registry's device (queried once, when a plan is built).
CUdevice device_of(Registry& registry);

// A plan's kernel: from the registry, or, for a linked unit, with `link` linked in (kiln/prim/operator.hpp).
inline Kernel get_kernel(Registry& registry, const std::string& name, const LinkedSource* link) {
  return link ? registry.get(name, *link) : registry.get(name);
}

// Throws kiln::Error(Errc::invalid_argument) when n does not fit CUB's 32-bit offsets.
std::uint32_t checked_count(std::size_t n, const char* primitive);

// The integer type a kernel is instantiated with for a public type: std::int64_t is `long` on LP64 hosts
// while the spec table spells 64-bit integers `long long`; both have one representation.
template <typename T> struct kernel_type { using type = T; };
template <> struct kernel_type<long> { using type = long long; };
template <> struct kernel_type<unsigned long> { using type = unsigned long long; };
template <typename T> using kernel_t = typename kernel_type<T>::type;

// The suffix a spec's name gives a type: exclusive_scan_i32, radix_sort_f64, …
template <typename T> constexpr const char* type_suffix() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "i32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "i64";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "u32";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "u64";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else static_assert(sizeof(T) == 0, "no spec suffix for this type");
}

// Throws kiln::Error(Errc::invalid_argument) naming the primitive when caller-supplied storage is too small.
void check_temp(TempStorage temp, std::size_t needed, const char* primitive);

// What every plan keeps and does around its dispatch: the registry, whose context each call makes current;
// its device; the unit's name, which errors give; the storage the plan owns. A plan hands each call its
// dispatch, a callable std::size_t(TempStorage) that sizes the storage when given none (data null) and runs
// otherwise.
class PlanBase {
 protected:
  PlanBase(Registry& registry, std::string_view unit)
      : registry_(&registry), device_(device_of(registry)), unit_(unit) {}

  // The temporary storage a dispatch needs.
  template <typename Dispatch>
  std::size_t sized(Dispatch&& dispatch) const {
    ContextScope scope(*registry_);
    return dispatch(TempStorage{});
  }
  // A dispatch with the caller's storage, checked against what it needs first. Thread-safe: it only reads
  // the plan.
  template <typename Dispatch>
  void run(TempStorage temp, Dispatch&& dispatch) const {
    ContextScope scope(*registry_);
    check_temp(temp, dispatch(TempStorage{}), unit_.c_str());
    dispatch(temp);
  }
  // A dispatch with the storage the plan owns (allocated only when the dispatch outgrows it).
  template <typename Dispatch>
  void run(Dispatch&& dispatch) {
    ContextScope scope(*registry_);
    const std::size_t bytes = dispatch(TempStorage{});
    dispatch(workspace_.reserve(bytes));
  }

  Registry* registry_;
  CUdevice device_;
  std::string unit_;

 private:
  Workspace workspace_;
};

// A fixed-type plan of libkiln_prim (ExclusiveSum<T>, ReduceSum<T>, …): an open plan (kiln/prim/*_plan.cuh)
// on kiln's own unit, behind a pointer, so that the public header, which g++ compiles, need not see CUB.
// `Open` derives from the open plan; it and these members are defined in the .cu file that instantiates
// the fixed plan (primitives/src/fixed_plan.cuh), which runs the calls.
template <typename Open>
class FixedPlan {
 public:
  FixedPlan(FixedPlan&&) noexcept;
  FixedPlan& operator=(FixedPlan&&) noexcept;
  ~FixedPlan();

  // Temporary storage a call of this size (items, or segments) needs.
  std::size_t temp_bytes(std::size_t n) const;

  // Items per tile under the policy for the loaded binary's architecture (the open plan's tile_items()).
  std::size_t tile_items() const;

  // Where the kernels came from (embedded, disk, JIT) and the arch of their binary (the open plan's kernel()).
  const Kernel& kernel() const;

 protected:
  explicit FixedPlan(Registry& registry);

  const Open& open() const { return *open_; }
  Open& open() { return *open_; }

 private:
  std::unique_ptr<Open> open_;
};

inline ContextScope::ContextScope(Registry& registry) {
  check(driver().cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
}

inline ContextScope::~ContextScope() {
  CUcontext popped;
  driver().cuCtxPopCurrent(&popped);
}

inline CUdevice device_of(Registry& registry) {
  CUdevice device = 0;
  check(driver().cuDeviceGet(&device, registry.device().ordinal), "cuDeviceGet");
  return device;
}

inline std::uint32_t checked_count(std::size_t n, const char* primitive) {
  if (n > std::numeric_limits<std::uint32_t>::max()) {
    throw kiln::Error(kiln::Errc::invalid_argument, std::string("kiln::prim::") + primitive + ": " + std::to_string(n) +
                            " items is more than the 2^32 - 1 this primitive supports");
  }
  return static_cast<std::uint32_t>(n);
}

inline void check_temp(TempStorage temp, std::size_t needed, const char* primitive) {
  if (needed > 0 && (temp.data == nullptr || temp.bytes < needed)) {
    throw kiln::Error(kiln::Errc::invalid_argument, std::string("kiln::prim::") + primitive + ": temporary storage of " +
                                std::to_string(temp.bytes) + " bytes given, " + std::to_string(needed) +
                                " needed (ask the plan's temp_bytes(n))");
  }
}

}  // namespace kiln::prim::detail
