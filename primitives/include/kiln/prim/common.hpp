// What every kiln primitive shares: the registry its kernels come from, and
// temporary device storage (supplied by the caller, or owned by a plan).
//
// A plan (ExclusiveSum<T>, RadixSortPairs<K>, …) resolves its kernels once, when it is built, and is then
// called any number of times on any stream. Given enough temporary storage it never allocates. A plan is
// not thread-safe; use one per thread or stream. One-shot functions (kiln::prim::exclusive_sum, …) build
// nothing: they use a process-wide plan and stream-ordered temporary storage (cudaMallocAsync).
// Every call reports a failed launch as kiln::Error.
//
// Pointers are device pointers. Item counts are limited to 2^32 - 1 (CUB's 32-bit offsets, as in
// cub::Device* called with int counts); larger counts throw std::length_error.
#pragma once

#include <kiln/registry.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::prim {

// The registry of kiln's primitives on device 0, created on first use with the default options (embedded,
// then the default disk cache, then JIT). Pass your own Registry to a plan to choose the device or tiers.
Registry& registry();

// The primitives' catalog, for a Registry of your own (generated from kernels/primitives.toml).
const Catalog& catalog();

// Temporary storage supplied by the caller: at least the plan's temp_bytes(n).
struct TempStorage {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// Temporary storage a plan owns: grows to the largest size asked for, freed with the plan.
class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  Workspace(Workspace&& other) noexcept;
  Workspace& operator=(Workspace&& other) noexcept;

  // At least `bytes` of device memory; allocates only when it has to grow.
  TempStorage reserve(std::size_t bytes);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  CUcontext context_ = nullptr;   // the context current when it was allocated
  std::uint64_t context_id_ = 0;  // and its cuCtxGetId: after a reset the handle stays, the memory is gone
};

namespace detail {

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

}  // namespace detail

}  // namespace kiln::prim
