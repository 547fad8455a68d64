// Reduce, scans, transform, sorts and selects with an operator given at run time, as CUDA C++ text (docs/primitives.md, "Operators given
// at run time"; docs/DESIGN.md, "Operators at run time"). The operator is compiled by NVRTC to LTO-IR and
// linked into CUB's kernels (kiln's linked rows, kernels/primitives.toml) by nvJitLink: the same kernels,
// tuning and launch shapes as cub::DeviceReduce::Reduce / DeviceScan::ExclusiveScan / InclusiveScan with
// an nvcc-compiled operator. What is built is cached on disk per operator text, so another process pays a
// disk read, not a compile; this registry keeps it in memory. Plain g++ code can use them.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::prim {

// A binary operator: `source` defines a __device__ function `name` callable as T(T, T) (its parameters may
// be const T&), e.g. "__device__ float op(float a, float b) { return a > b ? a : b; }". It may define
// helpers and include what NVRTC finds without a path (<cuda/std/...>, kiln_prim's headers). CUB regroups:
// it must be associative. A source that does not compile, or whose function has another signature, is a
// kiln::Error (compile) carrying NVRTC's log and the source.
struct Operator {
  std::string source;
  std::string name = "op";
  // Instead of `source`: LTO-IR the caller compiled (NVRTC -dlto -rdc=true for this device's compute arch)
  // of a translation unit that defines the function the plan's kernels call, as the text
  // linked_operator_source gives does. Linked as it is, keyed by its bytes; a mismatch is nvJitLink's
  // undefined reference, in the kiln::Error's log. One operator per plan (not TransformReduceWith).
  std::string lto_ir = {};
};

namespace detail {
// primitives/src/operator.cu: each holds the CUB plan over the linked kernels.
template <typename T> struct LinkedReduce;
template <typename T> struct LinkedExclusiveScan;
template <typename T> struct LinkedInclusiveScan;
template <typename K> struct LinkedMergeSort;
template <typename T> struct LinkedSelectIf;
template <typename K> struct LinkedUnique;
template <typename T> struct LinkedSegmentedReduce;
template <typename T> struct LinkedTransformReduce;
template <typename T> struct LinkedTransform;

// What every plan below shares: CUB's plan over the linked kernels (Impl, defined in operator.cu), and
// the members that only read it. Each plan adds its constructor and its calls.
template <typename Impl>
class LinkedPlan {
 public:
  ~LinkedPlan();
  LinkedPlan(LinkedPlan&&) noexcept;
  // Temporary storage a call with n items (segments, for SegmentedReduceWith) needs.
  std::size_t temp_bytes(std::size_t n) const;
  // Items per tile of the plan's main kernel under the policy for the loaded binary's architecture (for
  // the reduces: the most items the single-tile kernel reduces alone).
  std::size_t tile_items() const;
  // Where the linked kernels came from (jit, disk, memory), their arch and cache key.
  const Kernel& kernel() const;

 protected:
  explicit LinkedPlan(std::unique_ptr<Impl> plan);
  std::unique_ptr<Impl> plan_;
};
}  // namespace detail

// The items of a 16-byte struct, as its bytes: T = Bytes16 carries a struct of 16 bytes (at most 16-byte
// alignment) through the plans below, whose kernels touch an item only through the operator. The
// operator's function takes and returns `kiln_prim::bytes16` (kiln_prim/linked_op.cuh) and copies the
// struct in and out with memcpy; the Python module's structured dtypes of 16 bytes go this way.
struct alignas(16) Bytes16 {
  std::uint64_t word[2];
};

// T as the linked rows spell it (kernels/primitives.toml): the type an operator's definition takes and
// returns, e.g. "__device__ long long op(long long a, long long b)".
template <typename T>
constexpr const char* operator_type_spelling() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "unsigned int";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "long long";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "unsigned long long";
  else if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, Bytes16>) return "kiln_prim::bytes16";
  else static_assert(sizeof(T) == 0, "no linked rows for this type");
}

// The plans. T: std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, float, double or Bytes16. Building one
// links the operator (memory, disk, or a compile of a few hundred milliseconds); calls are CUB's dispatch.
// Thread-safe const calls, as the other plans.

// *out = op(init, in[0], …, in[n-1]) in CUB's tree order; n = 0 writes init.
template <typename T>
class ReduceWith : public detail::LinkedPlan<detail::LinkedReduce<T>> {
 public:
  explicit ReduceWith(const Operator& op, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, T init, CUstream stream = nullptr);
};

// out[0] = init, out[i] = op(out[i-1], in[i-1]) in CUB's order. In place (in == out) is allowed.
template <typename T>
class ExclusiveScanWith : public detail::LinkedPlan<detail::LinkedExclusiveScan<T>> {
 public:
  explicit ExclusiveScanWith(const Operator& op, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, T init, CUstream stream = nullptr);
};

// out[0] = in[0], out[i] = op(out[i-1], in[i]) in CUB's order. In place (in == out) is allowed.
template <typename T>
class InclusiveScanWith : public detail::LinkedPlan<detail::LinkedInclusiveScan<T>> {
 public:
  explicit InclusiveScanWith(const Operator& op, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr);
};

// out[i] = op(in[i]) for i < n (cub::DeviceTransform::Transform), `op` a __device__ function T(T):
// "__device__ float op(float x) { return x * x; }". in and out are device pointers; out may be in (in
// place) but must not overlap it otherwise. No temporary storage (temp_bytes is 0).
template <typename T>
class TransformWith : public detail::LinkedPlan<detail::LinkedTransform<T>> {
 public:
  explicit TransformWith(const Operator& op, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr) const;
};

// *out = reduce(init, transform(in[0]), …, transform(in[n-1])) in CUB's tree order, the transform applied
// as each item is read (a transform iterator: nothing is stored); n = 0 writes init. `transform` is a
// __device__ function T(T), `reduce` one T(T, T); both texts share one translation unit, so their names
// must differ: {"__device__ float sq(float x) { return x * x; }", "sq"} and the sum "op".
template <typename T>
class TransformReduceWith : public detail::LinkedPlan<detail::LinkedTransformReduce<T>> {
 public:
  TransformReduceWith(const Operator& transform, const Operator& reduce, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, T init, CUstream stream = nullptr);
};

// For i < num_segments: out[i] = op(init, in[offsets[i]], …, in[offsets[i+1] - 1]) in CUB's order, one
// thread block per segment (cub::DeviceSegmentedReduce::Reduce); `offsets` holds num_segments + 1
// non-decreasing offsets into `in`, and an empty segment gets init.
template <typename T>
class SegmentedReduceWith : public detail::LinkedPlan<detail::LinkedSegmentedReduce<T>> {
 public:
  explicit SegmentedReduceWith(const Operator& op, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets, T init,
                  TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t num_segments, const std::int32_t* offsets, T init,
                  CUstream stream = nullptr);
};

// Sorts keys[0, n) in place by `compare`, a strict weak order given as a __device__ function bool(K, K)
// (const K& parameters are fine): "__device__ bool op(float a, float b) { return a > b; }" sorts
// descending. values[i] moves with keys[i]. Stable, as cub::DeviceMergeSort::StableSortPairs: pairs whose
// keys compare equal keep their input order. K: the six types above.
template <typename K>
class MergeSortPairsWith : public detail::LinkedPlan<detail::LinkedMergeSort<K>> {
 public:
  using value_type = std::int32_t;

  explicit MergeSortPairsWith(const Operator& compare, Registry& registry = prim::registry());
  void operator()(K* keys, value_type* values, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(K* keys, value_type* values, std::size_t n, CUstream stream = nullptr);
};

// Writes to out[0, k) the items in[i] for which `pred`, a __device__ function bool(T), is true, in their
// input order, and k to *count (cub::DeviceSelect::If): "__device__ bool op(float x) { return x > 0; }".
// in, out and count are device pointers; out needs room for n items and must not overlap in. T: the six
// types above; n up to 2^32 - 1.
template <typename T>
class SelectIfWith : public detail::LinkedPlan<detail::LinkedSelectIf<T>> {
 public:
  explicit SelectIfWith(const Operator& pred, Registry& registry = prim::registry());
  void operator()(const T* in, T* out, std::int64_t* count, std::size_t n, TempStorage temp,
                  CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::int64_t* count, std::size_t n, CUstream stream = nullptr);
};

// Of each run of consecutive keys that `equal`, a __device__ function bool(K, K), says are equal, copies the
// first key and its value to keys_out and values_out, compacted in input order, and the number of runs to
// *num_selected (cub::DeviceSelect::UniqueByKey): "__device__ bool op(int a, int b) { return a / 10 == b / 10; }"
// keeps one pair per run of keys in the same tens. No range may overlap another. K: the six types above.
template <typename K>
class UniqueByKeyWith : public detail::LinkedPlan<detail::LinkedUnique<K>> {
 public:
  using value_type = std::int32_t;

  explicit UniqueByKeyWith(const Operator& equal, Registry& registry = prim::registry());
  void operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                  std::uint64_t* num_selected, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const K* keys_in, const value_type* values_in, K* keys_out, value_type* values_out,
                  std::uint64_t* num_selected, std::size_t n, CUstream stream = nullptr);
};

// One operator of a linked translation unit, and how the kernels call it: result(args...), C++ spelling.
struct LinkedCall {
  Operator op;
  std::string result;
  std::vector<std::string> args;
};

// The translation unit kiln links for the operators `calls` into `plan` (for errors: "ReduceWith<float>"):
// each operator's text, a check that its signature is the one the kernels call, and the definition they
// call. Its text is the disk cache's key; exposed for tests and tools. Throws kiln::Error(Errc::invalid_argument) when a
// name is not an identifier, or two operators have the same name (they share the translation unit).
LinkedSource linked_operators_source(const std::vector<LinkedCall>& calls, const std::string& plan);

// The translation unit kiln links for `op` into `plan` (for errors: "ReduceWith<float>"), whose kernels call
// it as result(args...) in C++ spelling ("bool", {"float", "float"}): the operator's text, a check that its
// signature is that one, and the definition the kernels call. Its text is the disk cache's key; exposed for
// tests and tools. Throws kiln::Error(Errc::invalid_argument) when op.name is not an identifier.
LinkedSource linked_operator_source(const Operator& op, const std::string& result, const std::vector<std::string>& args,
                                    const std::string& plan);
// The same for a binary operator type(type, type), the reduce and scan plans'.
LinkedSource linked_operator_source(const Operator& op, const std::string& type, const std::string& plan);

}  // namespace kiln::prim
