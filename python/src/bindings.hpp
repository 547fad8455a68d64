// What the parts of the module share: the handles Python holds, and each part's bind function.
#pragma once

#include <kiln/error.hpp>
#include <kiln/program.hpp>
#include <kiln/registry.hpp>

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>

namespace kiln::python {

// A kernel and what keeps its names alive: its Program (a registry's catalog lives for the process).
struct PyKernel {
  Kernel kernel;
  std::shared_ptr<Program> program;
};

// A registry handle: registries are kept for the process, one per catalog and device.
struct PyRegistry {
  Registry* registry = nullptr;
};

// A device address Python gave as an integer (an array's data pointer), as the pointer a plan takes.
template <typename T>
T* pointer_at(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

void bind_errors(pybind11::module_& m);

// An argument from Python that kiln refuses before any driver call: raised as kiln.ArgumentError (a
// kiln.Error with code invalid_argument that is also a ValueError) or, for a value of the wrong type,
// kiln.ArgumentTypeError (also a TypeError). A builtin_exception, so that pybind11's dispatcher and the
// launch path's own (kernels.cpp) both raise it.
class ArgumentError : public pybind11::builtin_exception {
 public:
  using builtin_exception::builtin_exception;
  void set_error() const override;
};
class ArgumentTypeError : public pybind11::builtin_exception {
 public:
  using builtin_exception::builtin_exception;
  void set_error() const override;
};

// A device ordinal from Python: an int from 0 (ArgumentTypeError, ArgumentError otherwise), or None for the
// current device; whether that device exists is the driver's to say.
int device_ordinal(const pybind11::handle& device);
// The device of the calling thread's current CUDA context, as CuPy's and PyTorch's current device is (the
// CUDA runtime makes a device's primary context current when it is selected); 0 when no context is current,
// as the runtime's default. Loads no driver and initialises no CUDA of its own.
int current_device();
// Raises kiln.Error for `e` (sets the Python error), where pybind11's translators do not run.
void set_python_error(const Error& e);
// A Reason's code as kiln.Error's .code names it, or None where there is no reason.
pybind11::object reason_code(const Reason& reason);
void bind_kernels(pybind11::module_& m);
void bind_registries(pybind11::module_& m);
void bind_record(pybind11::module_& m);
void bind_primitives(pybind11::module_& m);
void bind_operators(pybind11::module_& m);
void bind_cli(pybind11::module_& m);
void bind_dlpack(pybind11::module_& m);

// The process's registry of `catalog` on `device` (made on first use, kept for the process).
Registry& registry_of(const Catalog& catalog, int device);

// The registries a record's kernels may name: kiln's examples and every registry loaded so far.
std::vector<const Catalog*> known_catalogs();
// An architecture as Python gives it, 90, "90" or "sm_90", as its number; TypeError or ValueError otherwise.
unsigned arch_number(const pybind11::object& arch);

// The primitives' catalog, or nullptr where the package was built without them.
const Catalog* built_primitives_catalog();

}  // namespace kiln::python
