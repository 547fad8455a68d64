// What Python hands a launch, made into what cuLaunchKernel takes: arguments, grid and block, a stream.
#pragma once

#include <kiln/registry.hpp>

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::python {

// The kernel's arguments as bytes, each in an 8-byte-aligned slot, and a pointer to each (void**).
// A parameter's type is not known here (a program's kernels are C++ names only), so each argument is
// passed as its own type, as CuPy's RawKernel does: an object with __cuda_array_interface__ as its data
// pointer, a NumPy scalar as its dtype, a Python int as int64, a float as float64, None as a null pointer.
// An array with DLPack alone (__dlpack__) is asked for its export on the launch's `stream`, and the
// export is kept as long as this is. A launch makes one on the stack: up to kInline arguments need no allocation.
class LaunchArgs {
 public:
  LaunchArgs(const pybind11::handle& args, CUstream stream);
  LaunchArgs(const LaunchArgs&) = delete;
  LaunchArgs& operator=(const LaunchArgs&) = delete;

  void** pointers() noexcept { return pointers_; }
  // Argument i's bytes as they are passed.
  std::string bytes(std::size_t i) const { return {reinterpret_cast<const char*>(slots_[i].data()), sizes_[i]}; }
  std::size_t size() const noexcept { return count_; }

 private:
  using Slot = std::array<std::uint64_t, 2>;  // up to 16 bytes each (complex128)
  static constexpr std::size_t kInline = 16;

  std::size_t count_ = 0;
  Slot* slots_;
  std::uint8_t* sizes_;
  void** pointers_;
  std::array<Slot, kInline> inline_slots_;
  std::array<std::uint8_t, kInline> inline_sizes_;
  std::array<void*, kInline + 1> inline_pointers_;
  std::vector<Slot> heap_slots_;  // only past kInline arguments
  std::vector<std::uint8_t> heap_sizes_;
  std::vector<void*> heap_pointers_;
  std::vector<pybind11::object> exports_;  // DLPack capsules, each keeping its producer's tensor
};

// An int or a tuple of one to three ints; `what` names it in the error ("grid", "block").
Dim3 to_dim3(const pybind11::handle& value, const char* what);

// A call kernel(grid, block, args, shared_mem=0, stream=None), its arguments positional or by name, as
// a METH_FASTCALL | METH_KEYWORDS function receives them (`function` names it in errors): converted and
// checked but for args, which LaunchArgs reads (borrowed from the caller's call).
struct LaunchCall {
  Dim3 grid, block;
  unsigned shared_mem = 0;
  CUstream stream = nullptr;
  PyObject* args = nullptr;
};
LaunchCall launch_call(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const char* function);

// None (the legacy default stream), an int (a CUstream's address), an object with __cuda_stream__
// (cuda.core), .cuda_stream (PyTorch) or .ptr (CuPy).
CUstream to_stream(const pybind11::handle& stream);

}  // namespace kiln::python
