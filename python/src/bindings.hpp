// What the parts of the module share: the handles Python holds, and each part's bind function.
#pragma once

#include <kiln/error.hpp>
#include <kiln/program.hpp>
#include <kiln/registry.hpp>

#include <pybind11/pybind11.h>

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

void bind_errors(pybind11::module_& m);
// Raises kiln.Error for `e` (sets the Python error), where pybind11's translators do not run.
void set_python_error(const Error& e);
void bind_kernels(pybind11::module_& m);
void bind_registries(pybind11::module_& m);
void bind_record(pybind11::module_& m);
void bind_primitives(pybind11::module_& m);
void bind_cli(pybind11::module_& m);

// The process's registry of `catalog` on `device` (made on first use, kept for the process).
Registry& registry_of(const Catalog& catalog, int device);

// The registries a record's kernels may name: kiln's examples and every registry loaded so far.
std::vector<const Catalog*> known_catalogs();
// An architecture as Python gives it, 90, "90" or "sm_90", as its number; TypeError or ValueError otherwise.
unsigned arch_number(const pybind11::object& arch);

// The primitives' catalog, or nullptr where the package was built without them.
const Catalog* built_primitives_catalog();

}  // namespace kiln::python
