// kiln._kiln: the extension module over libkiln; python/kiln/__init__.py re-exports it.
#include "bindings.hpp"

#include <kiln/error.hpp>
#include <kiln/registry.hpp>  // context_device

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <string>
#include <string_view>

namespace py = pybind11;

namespace kiln::python {
namespace {

// kiln.Error and its argument errors. Made once and never freed: the translator may run until the
// interpreter's end.
PyObject* error_type = nullptr;
PyObject* argument_error_type = nullptr;
PyObject* argument_type_error_type = nullptr;

void raise_error(PyObject* type, const char* message, std::string_view code) {
  py::object instance = py::handle(type)(py::str(message));
  instance.attr("code") = py::str(std::string(code));
  PyErr_SetObject(type, instance.ptr());
}

// A subclass of kiln.Error and `builtin` (ValueError, TypeError): `except kiln.Error` and `except
// ValueError` both catch it. Its class attribute `code` is invalid_argument, so that one raised from
// Python (kiln/primitives.py) has it too.
PyObject* argument_error(py::module_& m, const char* name, PyObject* builtin, const char* doc) {
  py::tuple bases = py::make_tuple(py::handle(error_type), py::handle(builtin));
  PyObject* type = PyErr_NewExceptionWithDoc((std::string("kiln.") + name).c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  py::handle(type).attr("code") = py::str("invalid_argument");
  m.attr(name) = py::handle(type);
  return type;
}

}  // namespace

void set_python_error(const Error& e) { raise_error(error_type, e.what(), to_string(e.code())); }

py::object reason_code(const Reason& reason) {
  if (reason.empty()) return py::none();
  return py::str(std::string(to_string(reason.code)));
}

void ArgumentError::set_error() const { raise_error(argument_error_type, what(), "invalid_argument"); }

void ArgumentTypeError::set_error() const { raise_error(argument_type_error_type, what(), "invalid_argument"); }

int current_device() {
  // Only a process that has loaded the driver can have a current context: kiln does not load it for this.
  void* loaded = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (loaded == nullptr) return 0;
  int ordinal = 0;
  using GetCurrent = CUresult (*)(CUcontext*);
  if (auto get_current = reinterpret_cast<GetCurrent>(dlsym(loaded, "cuCtxGetCurrent"))) {
    CUcontext context = nullptr;
    // Before anyone's cuInit it answers CUDA_ERROR_NOT_INITIALIZED: no context, device 0.
    if (get_current(&context) == CUDA_SUCCESS && context != nullptr) ordinal = std::max(context_device(context), 0);
  }
  dlclose(loaded);
  return ordinal;
}

int device_ordinal(const py::handle& device) {
  if (device.is_none()) return current_device();
  if (!PyLong_Check(device.ptr()) || PyBool_Check(device.ptr()))
    throw ArgumentTypeError("device: " + std::string(py::str(py::type::handle_of(device).attr("__name__"))) +
                            " is not an int (a CUDA device ordinal) or None (the current device)");
  int overflow = 0;
  const long long ordinal = PyLong_AsLongLongAndOverflow(device.ptr(), &overflow);
  if (overflow == 0 && ordinal == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || ordinal < 0 || ordinal > INT_MAX)
    throw ArgumentError("device: " + std::string(py::str(device)) + " is not a CUDA device ordinal (an int from 0)");
  return static_cast<int>(ordinal);
}

// kiln::Error becomes kiln.Error, an Exception with .code (the Errc's name) and the message as str().
void bind_errors(py::module_& m) {
  error_type = PyErr_NewExceptionWithDoc("kiln.Error",
                                "An error of kiln's: .code is the kind (unknown_kernel, no_driver, compile, ...), "
                                "str() the message with its context.",
                                PyExc_Exception, nullptr);
  if (error_type == nullptr) throw py::error_already_set();
  py::handle(error_type).attr("code") = py::none();
  m.attr("Error") = py::handle(error_type);
  argument_error_type = argument_error(m, "ArgumentError", PyExc_ValueError,
                                       "A kiln.Error (code invalid_argument) that is a ValueError: an argument's "
                                       "value refused before any driver call (a size, a device, a pointer).");
  argument_type_error_type = argument_error(m, "ArgumentTypeError", PyExc_TypeError,
                                            "A kiln.Error (code invalid_argument) that is a TypeError: an argument "
                                            "of a type kiln does not take (not a device array, a dtype not supported).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      set_python_error(e);
    }
  });
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "kiln's kernel registry: programs given at run time and generated registries, over libkiln";
  kiln::python::bind_errors(m);
  kiln::python::bind_kernels(m);
  kiln::python::bind_registries(m);
  kiln::python::bind_record(m);
  kiln::python::bind_primitives(m);
  kiln::python::bind_operators(m);
  kiln::python::bind_cli(m);
  kiln::python::bind_dlpack(m);
}
