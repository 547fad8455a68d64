// kiln.Kernel (a launchable kernel and where it came from), kiln.Plan and kiln.PrecompileResult.
#include "bindings.hpp"
#include "launch_args.hpp"

#include <kiln/precompile.hpp>

#include <pybind11/stl.h>

#include <string>

namespace py = pybind11;

namespace kiln::python {
namespace {

std::string tier_name(Tier t) { return std::string(to_string(t)); }

void launch_kernel(const PyKernel& k, const py::handle& grid, const py::handle& block, const py::sequence& args,
                   unsigned shared_mem, const py::handle& stream) {
  Dim3 g = to_dim3(grid, "grid");
  Dim3 b = to_dim3(block, "block");
  CUstream s = to_stream(stream);
  LaunchArgs values(args);
  py::gil_scoped_release unlocked;
  launch(k.kernel, g, b, shared_mem, s, values.pointers());
}

}  // namespace

void bind_kernels(py::module_& m) {
  py::class_<PyKernel>(m, "Kernel",
                       "A launchable kernel (from Program.get or Registry.get): call it, or .launch(), with grid, "
                       "block and the kernel's arguments.")
      .def_property_readonly("name", [](const PyKernel& k) { return std::string(k.kernel.name); })
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
      .def("launch", &launch_kernel, py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("shared_mem") = 0,
           py::arg("stream") = py::none())
      .def("__call__", &launch_kernel, py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("shared_mem") = 0,
           py::arg("stream") = py::none())
      .def("__repr__", [](const PyKernel& k) {
        return "<kiln.Kernel " + std::string(k.kernel.name) + " from " + tier_name(k.kernel.provenance.source) +
               " sm_" + std::to_string(k.kernel.provenance.arch) + ">";
      });

  // What a launch would pass, without a kernel or a GPU: the checks and the layout (tests/python).
  m.def("_launch_layout", [](const py::handle& grid, const py::handle& block, const py::sequence& args,
                             const py::handle& stream) {
    Dim3 g = to_dim3(grid, "grid");
    Dim3 b = to_dim3(block, "block");
    CUstream s = to_stream(stream);
    LaunchArgs values(args);
    py::list bytes;
    for (std::size_t i = 0; i < values.size(); ++i) bytes.append(py::bytes(values.bytes(i)));
    return py::make_tuple(py::make_tuple(g.x, g.y, g.z), py::make_tuple(b.x, b.y, b.z), bytes,
                          reinterpret_cast<std::uintptr_t>(s));
  }, py::arg("grid"), py::arg("block"), py::arg("args"), py::arg("stream") = py::none());

  // A stream as launches take it, as its handle (an int; 0 for None): what kiln.primitives compares with a
  // library's current stream.
  m.def("_stream_handle", [](const py::handle& stream) { return reinterpret_cast<std::uintptr_t>(to_stream(stream)); },
        py::arg("stream"));

  py::class_<Plan>(m, "Plan", "Where get() would take a kernel from, without loading anything.")
      .def_readonly("available", &Plan::available)
      .def_readonly("reason", &Plan::reason)
      .def_property_readonly("source", [](const Plan& p) { return tier_name(p.source); })
      .def_readonly("arch", &Plan::arch)
      .def_readonly("ptx", &Plan::ptx)
      .def("__repr__", [](const Plan& p) {
        return p.available ? "<kiln.Plan " + tier_name(p.source) + " sm_" + std::to_string(p.arch) + ">"
                           : "<kiln.Plan unavailable: " + p.reason + ">";
      });

  py::class_<PrecompileResult>(m, "PrecompileResult", "What became of one unit compiled for an architecture.")
      .def_readonly("unit", &PrecompileResult::unit)
      .def_readonly("ok", &PrecompileResult::ok)
      .def_readonly("cached", &PrecompileResult::cached)
      .def_readonly("from_remote", &PrecompileResult::from_remote)
      .def_readonly("compiled", &PrecompileResult::compiled)
      .def_readonly("ms", &PrecompileResult::ms)
      .def_readonly("error", &PrecompileResult::error)
      .def("__repr__", [](const PrecompileResult& r) {
        return "<kiln.PrecompileResult " + r.unit + (r.ok ? (r.cached ? " cached" : " compiled") : " failed") + ">";
      });
}

}  // namespace kiln::python
