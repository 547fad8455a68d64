// kiln._kiln: the extension module over libkiln; python/kiln/__init__.py re-exports it.
#include "bindings.hpp"

#include <kiln/error.hpp>

#include <string>

namespace py = pybind11;

namespace kiln::python {
namespace {

// kiln.Error. Made once and never freed: the translator may run until the interpreter's end.
PyObject* error_type = nullptr;

}  // namespace

void set_python_error(const Error& e) {
  py::object instance = py::handle(error_type)(py::str(e.what()));
  instance.attr("code") = py::str(std::string(to_string(e.code())));
  PyErr_SetObject(error_type, instance.ptr());
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
  kiln::python::bind_cli(m);
}
