// What every plan of kiln's primitives does around CUB's dispatch: the registry's context made current,
// its device, item counts and caller storage checked. Header-only (see kiln/prim/storage.hpp).
#pragma once

#include <kiln/driver.hpp>
#include <kiln/error.hpp>
#include <kiln/prim/storage.hpp>
#include <kiln/registry.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// Throws std::length_error when n does not fit CUB's 32-bit offsets.
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

// Throws a std::invalid_argument naming the primitive when caller-supplied storage is too small.
void check_temp(TempStorage temp, std::size_t needed, const char* primitive);

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
    throw std::length_error(std::string("kiln::prim::") + primitive + ": " + std::to_string(n) +
                            " items is more than the 2^32 - 1 this primitive supports");
  }
  return static_cast<std::uint32_t>(n);
}

inline void check_temp(TempStorage temp, std::size_t needed, const char* primitive) {
  if (needed > 0 && (temp.data == nullptr || temp.bytes < needed)) {
    throw std::invalid_argument(std::string("kiln::prim::") + primitive + ": temporary storage of " +
                                std::to_string(temp.bytes) + " bytes given, " + std::to_string(needed) +
                                " needed (ask the plan's temp_bytes(n))");
  }
}

}  // namespace kiln::prim::detail
