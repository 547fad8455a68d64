// Recorded demand from Python: record what this process compiles, read a record, compile it elsewhere.
#include "bindings.hpp"

#include <kiln/precompile.hpp>
#include <kiln/record.hpp>

#include <pybind11/stl.h>

#include <map>
#include <string>

namespace py = pybind11;

namespace kiln::python {

void bind_record(py::module_& m) {
  py::class_<ProgramSource>(m, "ProgramSource", "A recorded program: what compiles it again.")
      .def_readonly("source", &ProgramSource::source)
      .def_property_readonly("headers",
                             [](const ProgramSource& s) {
                               std::map<std::string, std::string> out;
                               for (const auto& h : s.headers) out.emplace(h.name, h.source);
                               return out;
                             })
      .def_readonly("options", &ProgramSource::options)
      .def_readonly("name_expressions", &ProgramSource::name_expressions)
      .def_readonly("label", &ProgramSource::label);
  py::class_<RecordedKernel>(m, "RecordedKernel", "A table's kernel no embedded binary served.")
      .def_readonly("registry", &RecordedKernel::registry)
      .def_readonly("kernel", &RecordedKernel::kernel)
      .def_readonly("arch", &RecordedKernel::arch);
  py::class_<DemandRecord>(m, "DemandRecord")
      .def_readonly("programs", &DemandRecord::programs)
      .def_readonly("kernels", &DemandRecord::kernels);

  m.def("record_demand", &record_demand, py::arg("path"),
        "Append what this process compiles from now on to `path` (what KILN_RECORD=path does from the start).");
  m.def("read_record", &read_record, py::arg("path"));
  m.def(
      "precompile_record",
      [](const py::object& record, const py::object& arch) {
        const unsigned sm = arch_number(arch);
        DemandRecord r = py::isinstance<DemandRecord>(record) ? record.cast<DemandRecord>()
                                                              : read_record(py::module_::import("os").attr("fspath")(record).cast<std::string>());
        std::vector<const Catalog*> catalogs = known_catalogs();
        py::gil_scoped_release unlocked;
        return precompile_record(r, sm, catalogs);
      },
      py::arg("record"), py::arg("arch"),
      "Compile what a record (a DemandRecord or a path) names for `arch` into the disk cache; its kernels of "
      "kiln's examples and of every registry loaded so far.");
}

}  // namespace kiln::python
