// kiln.Program (a program given at run time) and kiln.Registry (a generated table: kiln's examples, or a
// project's, loaded from its shared library).
#include "bindings.hpp"

#include "examples_catalog.hpp"

#include <kiln/error.hpp>
#include <kiln/precompile.hpp>

#include <pybind11/stl.h>

#include <dlfcn.h>

#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace kiln::python {
namespace {

// Registries live for the process, as kiln::program()'s programs do: kernels handed out keep pointing
// into them, and a second handle for the same catalog and device is the same registry.
std::mutex registries_mutex;
auto& registries() {
  static auto* map = new std::map<std::pair<const Catalog*, int>, Registry*>();  // never freed: see above
  return *map;
}

PyRegistry registry_for(const Catalog& catalog, int device) { return {&registry_of(catalog, device)}; }

// The Itanium-mangled name of `ns1::ns2::catalog()`, the function a generated catalog defines.
std::string mangled_catalog_function(const std::string& ns) {
  std::string out = "_ZN";
  std::size_t start = 0;
  while (true) {
    std::size_t end = ns.find("::", start);
    std::string part = ns.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty())
      throw Error(Errc::invalid_argument, "Registry.load: '" + ns + "' is not a C++ namespace (a::b)");
    out += std::to_string(part.size()) + part;
    if (end == std::string::npos) break;
    start = end + 2;
  }
  return out + "7catalogEv";
}

// The catalog a generated catalog defines in a shared library. Libraries stay loaded: a catalog's
// tables are the library's data.
const Catalog& load_catalog(const std::string& path, const std::string& name) {
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr)
    throw Error(Errc::invalid_argument, "Registry.load: cannot load '" + path + "': " + ::dlerror());
  const bool is_namespace = name.find("::") != std::string::npos;
  const std::string symbol = is_namespace ? mangled_catalog_function(name) : name;
  void* function = ::dlsym(library, symbol.c_str());
  if (function == nullptr)
    throw Error(Errc::invalid_argument,
                "Registry.load: '" + path + "' defines no " +
                    (is_namespace ? name + "::catalog() (symbol " + symbol + ")"
                                  : "function '" + name + "' (extern \"C\" const kiln::Catalog* " + name + "())") +
                    "; give the registry's namespace from its spec table (\"my::kernels\") or an extern \"C\" "
                    "function returning its catalog");
  if (is_namespace) return reinterpret_cast<const Catalog& (*)()>(function)();
  const Catalog* catalog = reinterpret_cast<const Catalog* (*)()>(function)();
  if (catalog == nullptr) throw Error(Errc::invalid_argument, "Registry.load: " + name + "() returned no catalog");
  return *catalog;
}

std::vector<ProgramHeader> to_headers(const py::handle& headers) {
  std::vector<ProgramHeader> out;
  if (headers.is_none()) return out;
  if (!py::isinstance<py::dict>(headers)) throw ArgumentTypeError("headers: a dict {name: text} is expected");
  for (auto [name, text] : py::reinterpret_borrow<py::dict>(headers)) {
    if (!py::isinstance<py::str>(name) || !py::isinstance<py::str>(text))
      throw ArgumentTypeError("headers: each name and text must be a str");
    out.push_back({name.cast<std::string>(), text.cast<std::string>()});
  }
  return out;
}

std::vector<std::string> to_strings(const py::handle& values, const char* what) {
  std::vector<std::string> out;
  if (values.is_none()) return out;
  if (py::isinstance<py::str>(values)) throw ArgumentTypeError(std::string(what) + ": a list of str, not one str");
  for (py::handle v : py::iter(values)) {
    if (!py::isinstance<py::str>(v))
      throw ArgumentTypeError(std::string(what) + ": " + std::string(py::str(py::type::handle_of(v).attr("__name__"))) +
                           " is not a str");
    out.push_back(v.cast<std::string>());
  }
  return out;
}

std::shared_ptr<Program> make_program(const std::string& source, const py::handle& headers, const py::handle& options,
                                      const py::handle& name_expressions, const std::string& label,
                                      const py::handle& device) {
  const int ordinal = device_ordinal(device);  // before anything else is made of the arguments
  ProgramSource src{.source = source,
                    .headers = to_headers(headers),
                    .options = to_strings(options, "options"),
                    .name_expressions = to_strings(name_expressions, "name_expressions"),
                    .label = label};
  py::gil_scoped_release unlocked;
  return program(src, ordinal);
}

}  // namespace

Registry& registry_of(const Catalog& catalog, int device) {
  std::lock_guard lock(registries_mutex);
  Registry*& r = registries()[{&catalog, device}];
  if (r == nullptr) r = new Registry(catalog, device);
  return *r;
}

std::vector<const Catalog*> known_catalogs() {
  std::vector<const Catalog*> out{&kiln::examples::catalog()};
  std::lock_guard lock(registries_mutex);
  for (const auto& [key, registry] : registries())
    if (key.first != out.front()) out.push_back(key.first);
  return out;
}

// An architecture as Python gives it: 90, "90" or "sm_90".
unsigned arch_number(const py::object& arch) {
  std::string text;
  if (py::isinstance<py::bool_>(arch)) throw ArgumentTypeError("arch: a number (90) or 'sm_90', not a bool");
  if (py::isinstance<py::int_>(arch)) {
    text = py::str(arch);
  } else if (py::isinstance<py::str>(arch)) {
    text = arch.cast<std::string>();
    if (text.starts_with("sm_")) text.erase(0, 3);
  } else {
    throw ArgumentTypeError("arch: a number (90) or 'sm_90', not " + std::string(py::str(py::type::handle_of(arch).attr("__name__"))));
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 10 || value > 999)
    throw ArgumentError("arch: '" + text + "' is not an architecture: give 90 or 'sm_90'");
  return value;
}

void bind_registries(py::module_& m) {
  py::class_<Program, std::shared_ptr<Program>>(
      m, "Program",
      "CUDA source given at run time: its kernels are got by their name expressions, through kiln's tiers "
      "(memory, disk, remote, JIT). The same content gives the same program (kiln::program).")
      .def(py::init(&make_program), py::arg("source"), py::kw_only(), py::arg("headers") = py::none(),
           py::arg("options") = py::none(), py::arg("name_expressions") = py::none(), py::arg("label") = "",
           py::arg("device") = py::int_(0))
      .def(
          "get",
          [](const std::shared_ptr<Program>& p, const std::string& expression) {
            py::gil_scoped_release unlocked;
            return PyKernel{p->get(expression), p};
          },
          py::arg("name_expression"))
      .def("plan", [](Program& p, const std::string& expression) { return p.plan(expression); },
           py::arg("name_expression"))
      .def(
          "precompile",
          [](Program& p, const py::object& arch) {
            const unsigned sm = arch_number(arch);
            py::gil_scoped_release unlocked;
            return p.precompile(sm);
          },
          py::arg("arch"), "Compile for `arch` (80 or 'sm_80') into the disk cache; no GPU needed.")
      .def("estimate_ms", &Program::estimate_ms,
           "How long its compile is expected to take on one thread (ms): the time its last compile took, kept in "
           "its cache directory, else a guess from its size. What compile_all orders programs by.")
      .def_property_readonly("label", &Program::label)
      .def_property_readonly("digest", &Program::digest)
      // The registry keeps its program alive: keep_alive rides on a cpp_function, as pybind11 2.11 and
      // later require of a property.
      .def_property_readonly("registry", py::cpp_function([](Program& p) { return PyRegistry{&p.registry()}; },
                                                          py::keep_alive<0, 1>()))
      .def("__repr__", [](Program& p) { return "<kiln.Program " + p.label() + " " + p.digest().substr(0, 12) + ">"; });

  py::class_<WarmupStatus::PerKernel>(m, "KernelStatus")
      .def_readonly("name", &WarmupStatus::PerKernel::name)
      .def_readonly("state", &WarmupStatus::PerKernel::state)
      .def_property_readonly("tier", [](const WarmupStatus::PerKernel& k) { return std::string(to_string(k.tier)); })
      .def_readonly("ms", &WarmupStatus::PerKernel::ms)
      .def_readonly("error", &WarmupStatus::PerKernel::error);
  py::class_<WarmupStatus>(m, "WarmupStatus")
      .def_readonly("submitted", &WarmupStatus::submitted)
      .def_readonly("compiled", &WarmupStatus::compiled)
      .def_readonly("deferred", &WarmupStatus::deferred)
      .def_readonly("pending", &WarmupStatus::pending)
      .def_readonly("failed", &WarmupStatus::failed)
      .def_readonly("kernels", &WarmupStatus::kernels);

  py::class_<DeviceInfo>(m, "DeviceInfo", "The registry's GPU.")
      .def_readonly("ordinal", &DeviceInfo::ordinal)
      .def_readonly("name", &DeviceInfo::name)
      .def_readonly("arch", &DeviceInfo::arch)
      .def_readonly("driver_version", &DeviceInfo::driver_version)
      .def_readonly("total_memory", &DeviceInfo::total_memory);

  py::class_<PyRegistry>(m, "Registry", "A registry generated by kiln-gen, for one device.")
      .def_static(
          "load",
          [](const std::string& path, const std::string& name, const py::handle& device) {
            const int ordinal = device_ordinal(device);
            return registry_for(load_catalog(path, name), ordinal);
          },
          py::arg("path"), py::arg("name"), py::arg("device") = py::int_(0),
          "The registry a shared library defines: `name` is its spec table's namespace (\"my::kernels\", "
          "whose catalog() kiln-gen generates) or an extern \"C\" function returning a const kiln::Catalog*.")
      .def_property_readonly("name", [](const PyRegistry& r) { return std::string(r.registry->catalog().name); })
      .def_property_readonly("kernels",
                             [](const PyRegistry& r) {
                               std::vector<std::string> names;
                               const Catalog& c = r.registry->catalog();
                               for (const auto& k : c.kernels) names.emplace_back(c.str(k.name));
                               return names;
                             })
      .def(
          "get",
          [](const PyRegistry& r, const std::string& name) {
            py::gil_scoped_release unlocked;
            return PyKernel{r.registry->get(name), nullptr};
          },
          py::arg("name"))
      .def("plan", [](const PyRegistry& r, const std::string& name) { return r.registry->plan(name); }, py::arg("name"))
      .def(
          "precompile",
          [](const PyRegistry& r, const py::object& arch, const std::vector<std::string>& kernels, unsigned jobs) {
            const unsigned sm = arch_number(arch);
            py::gil_scoped_release unlocked;
            return precompile(r.registry->catalog(), sm, kernels, jobs);
          },
          py::arg("arch"), py::arg("kernels") = std::vector<std::string>{}, py::arg("jobs") = 0,
          "Compile the units of `kernels` (all when empty) for `arch` into the disk cache; no GPU needed.")
      .def(
          "request_warmup",
          [](const PyRegistry& r, const std::vector<std::string>& names) { r.registry->request_warmup(names); },
          py::arg("names"))
      .def(
          "ensure_warm",
          [](const PyRegistry& r, const std::vector<std::string>& names, double timeout_s) {
            if (!(timeout_s >= 0)) throw ArgumentError("timeout_s: must be a number of seconds >= 0");
            py::gil_scoped_release unlocked;
            return r.registry->ensure_warm(names, std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000)));
          },
          py::arg("names"), py::arg("timeout_s"), "The names still not ready after at most timeout_s seconds.")
      .def("status", [](const PyRegistry& r) { return r.registry->status(); })
      .def(
          "device",
          [](const PyRegistry& r) {
            py::gil_scoped_release unlocked;
            return r.registry->device();
          },
          "The GPU (initialises the driver: kiln.Error no_driver or no_device without one).")
      .def("__repr__", [](const PyRegistry& r) { return "<kiln.Registry " + std::string(r.registry->catalog().name) + ">"; });

  m.def("program", &make_program, py::arg("source"), py::kw_only(), py::arg("headers") = py::none(),
        py::arg("options") = py::none(), py::arg("name_expressions") = py::none(), py::arg("label") = "",
        py::arg("device") = py::int_(0),
        "kiln::program: the Program of this content, the same object while one is alive (Program() makes a "
        "new handle on the same program).");
  m.def(
      "compile_all",
      [](const std::vector<std::shared_ptr<Program>>& programs, const py::object& arch) {
        const unsigned sm = arch.is_none() ? 0u : arch_number(arch);
        py::gil_scoped_release unlocked;
        return kiln::compile_all(programs, sm);
      },
      py::arg("programs"), py::arg("arch") = py::none(),
      "kiln::compile_all: many programs compiled at once, handed to the JIT pool together and longest first "
      "(as a table's units), so that the longest gets the critical path's threads. arch None: every kernel made "
      "ready on each program's device; arch 90 or 'sm_90': compiled into the disk cache, no GPU needed. One "
      "PrecompileResult per program, in order (ok False and .error for one that failed); waits for all.");
  m.def(
      "examples_registry",
      [](const py::handle& device) { return registry_for(kiln::examples::catalog(), device_ordinal(device)); },
      py::arg("device") = py::int_(0), "kiln's example registry (kernels/examples.toml).");
}

}  // namespace kiln::python
