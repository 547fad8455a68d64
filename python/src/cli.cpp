// kiln._cli_main: kiln's command line over the registries this package holds, for `python -m kiln`
// (python/kiln/__main__.py): the examples, the primitives where the package has them, and every registry
// loaded so far.
#include "bindings.hpp"

#include <kiln/cli.hpp>

#include <pybind11/stl.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace py = pybind11;

namespace kiln::python {

void bind_cli(py::module_& m) {
  m.def(
      "_cli_main",
      [](const std::vector<std::string>& argv) {
        std::vector<const Catalog*> catalogs = known_catalogs();
        if (const Catalog* primitives = built_primitives_catalog()) catalogs.push_back(primitives);
        std::vector<std::string> args = argv;
        std::vector<char*> pointers;
        for (std::string& a : args) pointers.push_back(a.data());
        pointers.push_back(nullptr);
        py::gil_scoped_release unlocked;
        const int status = cli_main(static_cast<int>(args.size()), pointers.data(), catalogs);
        std::cout.flush();
        std::cerr.flush();
        std::fflush(nullptr);
        return status;
      },
      py::arg("argv"), "kiln's command line: argv[0] is the program's name; returns its exit status.");
}

}  // namespace kiln::python
