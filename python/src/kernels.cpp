// kiln.Kernel (a launchable kernel and where it came from), kiln.LoadPlan and kiln.PrecompileResult.
#include "bindings.hpp"
#include "launch_args.hpp"

#include <kiln/precompile.hpp>

#include <pybind11/stl.h>

#include <string>

namespace py = pybind11;

namespace kiln::python {
namespace {

std::string tier_name(Tier t) { return std::string(to_string(t)); }

// What `body` returns as a new reference, or null with the Python error set: the work of pybind11's
// dispatcher, for the functions below that are plain C functions.
template <typename Body>
PyObject* guarded(Body&& body) noexcept {
  try {
    return body().release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const Error& e) {
    set_python_error(e);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// Kernel.__call__ and Kernel.launch: a plain METH_FASTCALL | METH_KEYWORDS method rather than a pybind11
// one, whose dispatcher copies the keyword arguments' dict and looks each parameter up by a C string, a
// measurable part of a launch's cost on the host.
PyObject* launch_kernel(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return guarded([&] {
    // An instance made by Kernel.__new__ alone holds no kernel: refused before anything reads it.
    if (!reinterpret_cast<py::detail::instance*>(self)->get_value_and_holder().holder_constructed())
      throw py::type_error("this kiln.Kernel holds no kernel: kernels come from a Program or a registry");
    const PyKernel& k = py::cast<const PyKernel&>(py::handle(self));
    const LaunchCall call = launch_call(args, nargs, kwnames, "Kernel");
    LaunchArgs values(call.args, call.stream);
    {
      py::gil_scoped_release unlocked;
      launch(k.kernel, call.grid, call.block, call.shared_mem, call.stream, values.pointers());
    }
    return py::none();
  });
}

// What a launch would pass, without a kernel or a GPU: the checks and the layout (tests/python).
PyObject* launch_layout(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return guarded([&]() -> py::object {
    const LaunchCall call = launch_call(args, nargs, kwnames, "_launch_layout");
    LaunchArgs values(call.args, call.stream);
    py::list bytes;
    for (std::size_t i = 0; i < values.size(); ++i) bytes.append(py::bytes(values.bytes(i)));
    return py::make_tuple(py::make_tuple(call.grid.x, call.grid.y, call.grid.z),
                          py::make_tuple(call.block.x, call.block.y, call.block.z), bytes,
                          reinterpret_cast<std::uintptr_t>(call.stream), call.shared_mem);
  });
}

constexpr int kFastCall = METH_FASTCALL | METH_KEYWORDS;

PyCFunction fast_function(PyObject* (*function)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*)) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(function));
}

PyMethodDef kernel_methods[] = {
    {"__call__", fast_function(&launch_kernel), kFastCall,
     "kernel(grid, block, args, shared_mem=0, stream=None): launch it. grid and block are an int or a tuple of "
     "1 to 3 ints; args a sequence of the kernel's arguments."},
    {"launch", fast_function(&launch_kernel), kFastCall,
     "launch(grid, block, args, shared_mem=0, stream=None): the same as calling the kernel."},
};

PyMethodDef layout_method = {
    "_launch_layout", fast_function(&launch_layout), kFastCall,
    "_launch_layout(grid, block, args, shared_mem=0, stream=None) -> (grid, block, [argument bytes], stream, "
    "shared_mem): what a launch would pass, checked as a launch checks it."};

}  // namespace

void bind_kernels(py::module_& m) {
  py::class_<PyKernel> kernel(m, "Kernel",
                              "A launchable kernel (from Program.get or Registry.get): call it, or .launch(), with "
                              "grid, block and the kernel's arguments.");
  kernel.def_property_readonly("name", [](const PyKernel& k) { return std::string(k.kernel.name); })
      .def_property_readonly("lowered_name", [](const PyKernel& k) { return std::string(k.kernel.lowered_name); })
      .def_property_readonly("tier", [](const PyKernel& k) { return tier_name(k.kernel.provenance.tier); },
                             "the tier that served the get() that made this Kernel: memory after the first")
      .def_property_readonly("source", [](const PyKernel& k) { return tier_name(k.kernel.provenance.source); },
                             "the tier its binary came from: embedded, disk, remote, ptx or jit")
      .def_property_readonly("arch", [](const PyKernel& k) { return k.kernel.provenance.arch; })
      .def_property_readonly("ptx", [](const PyKernel& k) { return k.kernel.provenance.ptx; })
      .def_property_readonly("load_ms", [](const PyKernel& k) { return k.kernel.provenance.load_ms; })
      .def_property_readonly("cache_key", [](const PyKernel& k) { return std::string(k.kernel.provenance.cache_key); })
      .def_property_readonly("handle", [](const PyKernel& k) { return reinterpret_cast<std::uintptr_t>(k.kernel.kernel); },
                             "the CUkernel, as an int")
      .def("__repr__", [](const PyKernel& k) {
        return "<kiln.Kernel " + std::string(k.kernel.name) + " from " + tier_name(k.kernel.provenance.source) +
               " sm_" + std::to_string(k.kernel.provenance.arch) + ">";
      });

  for (PyMethodDef& method : kernel_methods) {
    PyObject* descriptor = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(kernel.ptr()), &method);
    if (descriptor == nullptr) throw py::error_already_set();
    kernel.attr(method.ml_name) = py::reinterpret_steal<py::object>(descriptor);
  }
  PyObject* layout = PyCFunction_NewEx(&layout_method, nullptr, m.attr("__name__").ptr());
  if (layout == nullptr) throw py::error_already_set();
  m.attr("_launch_layout") = py::reinterpret_steal<py::object>(layout);

  // A stream as launches take it, as its handle (an int; 0 for None): what kiln.primitives compares with a
  // library's current stream.
  m.def("_stream_handle", [](const py::handle& stream) { return reinterpret_cast<std::uintptr_t>(to_stream(stream)); },
        py::arg("stream"));

  py::class_<LoadPlan>(m, "LoadPlan", "Where get() would take a kernel from, without loading anything.")
      .def_readonly("available", &LoadPlan::available)
      .def_property_readonly("reason", [](const LoadPlan& p) { return p.reason.message; })
      .def_property_readonly("reason_code", [](const LoadPlan& p) { return reason_code(p.reason); })
      .def_property_readonly("tier", [](const LoadPlan& p) { return tier_name(p.tier); },
                             "the tier that would serve it: memory when loaded already, as Kernel.tier says after get()")
      .def_property_readonly("source", [](const LoadPlan& p) { return tier_name(p.source); },
                             "where its binary comes from, as Kernel.source says")
      .def_readonly("arch", &LoadPlan::arch)
      .def_readonly("ptx", &LoadPlan::ptx)
      .def("__repr__", [](const LoadPlan& p) {
        return p.available ? "<kiln.LoadPlan " + tier_name(p.tier) + " sm_" + std::to_string(p.arch) + ">"
                           : "<kiln.LoadPlan unavailable: " + p.reason.message + ">";
      });

  py::class_<PrecompileResult>(m, "PrecompileResult", "What became of one unit compiled for an architecture.")
      .def_readonly("unit", &PrecompileResult::unit)
      .def_readonly("ok", &PrecompileResult::ok)
      .def_readonly("cached", &PrecompileResult::cached)
      .def_readonly("from_remote", &PrecompileResult::from_remote)
      .def_readonly("compiled", &PrecompileResult::compiled)
      .def_readonly("ms", &PrecompileResult::ms)
      .def_property_readonly("error", [](const PrecompileResult& r) { return r.error.message; })  // repr: python/kiln/__init__.py
      .def_property_readonly("error_code", [](const PrecompileResult& r) { return reason_code(r.error); });
}

}  // namespace kiln::python
