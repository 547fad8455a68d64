// Reduce and scans with a binary operator given at run time, as CUDA C++ text (README.md, "Operators given
// at run time"; docs/DESIGN.md, "Operators at run time"). The operator is compiled by NVRTC to LTO-IR and
// linked into CUB's kernels (kiln's linked rows, kernels/primitives.toml) by nvJitLink: the same kernels,
// tuning and launch shapes as cub::DeviceReduce::Reduce / DeviceScan::ExclusiveScan / InclusiveScan with
// an nvcc-compiled operator. What is built is cached on disk per operator text, so another process pays a
// disk read, not a compile; this registry keeps it in memory. Plain g++ code can use them.
#pragma once

#include <kiln/prim/common.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::prim {

// A binary operator: `source` defines a __device__ function `name` callable as T(T, T) (its parameters may
// be const T&), e.g. "__device__ float op(float a, float b) { return a > b ? a : b; }". It may define
// helpers and include what NVRTC finds without a path (<cuda/std/...>, kiln_prim's headers). CUB regroups:
// it must be associative. A source that does not compile, or whose function has another signature, is a
// kiln::Error (compile) carrying NVRTC's log and the source.
struct Operator {
  std::string source;
  std::string name = "op";
};

namespace detail {
// primitives/src/operator.cu: each holds the CUB plan over the linked kernels.
template <typename T> struct LinkedReduce;
template <typename T> struct LinkedExclusiveScan;
template <typename T> struct LinkedInclusiveScan;
}  // namespace detail

// The plans. T: std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, float or double. Building one
// links the operator (memory, disk, or a compile of a few hundred milliseconds); calls are CUB's dispatch.
// Thread-safe const calls, as the other plans.

// *out = op(init, in[0], …, in[n-1]) in CUB's tree order; n = 0 writes init.
template <typename T>
class ReduceWith {
 public:
  explicit ReduceWith(const Operator& op, Registry& registry = prim::registry());
  ~ReduceWith();
  ReduceWith(ReduceWith&&) noexcept;
  std::size_t temp_bytes(std::size_t n) const;
  void operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, T init, CUstream stream = nullptr);
  // The most items the single-tile kernel reduces alone (more take two passes).
  std::size_t tile_items() const;
  // Where the linked kernels came from (jit, disk, memory), their arch and cache key: the sweep kernel.
  const Kernel& kernel() const;

 private:
  std::unique_ptr<detail::LinkedReduce<T>> plan_;
};

// out[0] = init, out[i] = op(out[i-1], in[i-1]) in CUB's order. In place (in == out) is allowed.
template <typename T>
class ExclusiveScanWith {
 public:
  explicit ExclusiveScanWith(const Operator& op, Registry& registry = prim::registry());
  ~ExclusiveScanWith();
  ExclusiveScanWith(ExclusiveScanWith&&) noexcept;
  std::size_t temp_bytes(std::size_t n) const;
  void operator()(const T* in, T* out, std::size_t n, T init, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, T init, CUstream stream = nullptr);
  std::size_t tile_items() const;
  const Kernel& kernel() const;

 private:
  std::unique_ptr<detail::LinkedExclusiveScan<T>> plan_;
};

// out[0] = in[0], out[i] = op(out[i-1], in[i]) in CUB's order. In place (in == out) is allowed.
template <typename T>
class InclusiveScanWith {
 public:
  explicit InclusiveScanWith(const Operator& op, Registry& registry = prim::registry());
  ~InclusiveScanWith();
  InclusiveScanWith(InclusiveScanWith&&) noexcept;
  std::size_t temp_bytes(std::size_t n) const;
  void operator()(const T* in, T* out, std::size_t n, TempStorage temp, CUstream stream = nullptr) const;
  void operator()(const T* in, T* out, std::size_t n, CUstream stream = nullptr);
  std::size_t tile_items() const;
  const Kernel& kernel() const;

 private:
  std::unique_ptr<detail::LinkedInclusiveScan<T>> plan_;
};

// The translation unit kiln links for `op` into a plan of `family` ("reduce", "exclusive_scan",
// "inclusive_scan") over `type` (C++ spelling: "float"): the operator's text, a check that its signature
// is type(type, type), and the definition the kernels call. Its text is the disk cache's key; exposed for
// tests and tools. Throws std::invalid_argument when op.name is not an identifier.
LinkedSource linked_operator_source(const Operator& op, const std::string& type, const std::string& plan);

}  // namespace kiln::prim
