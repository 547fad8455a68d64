// kiln._Primitive: libkiln_prim's plans over raw device pointers, one per (primitive, type, device), for
// python/kiln/primitives.py, which checks the arrays and allocates outputs.
#include "bindings.hpp"
#include "launch_args.hpp"
#include "stream_storage.hpp"

#include <kiln/error.hpp>
#include <kiln/prim/storage.hpp>  // header-only: TempStorage

#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef KILN_PYTHON_PRIMITIVES
#include <kiln/driver.hpp>
#include <kiln/prim.hpp>
#include <kiln/prim/plan_types.hpp>  // generated: the types of the table's rows
#endif

namespace py = pybind11;

namespace kiln::python {
namespace {

using Pointers = std::array<std::uintptr_t, 5>;

// What a call of any primitive takes: its device pointers in the primitive's order, and two sizes (items,
// and segments or needles where the primitive has them).
struct Sizes {
  std::size_t n = 0;
  std::size_t m = 0;
};

// One plan of libkiln_prim behind a uniform call, so that Python needs one class for all of them. The
// plan's const calls only read it: one Primitive serves every caller and stream.
struct Primitive {
  std::string name;  // its main kernel, e.g. exclusive_scan_i32_sweep
  int device = 0;
  Registry* registry = nullptr;
  std::shared_ptr<void> plan;
  std::function<std::size_t(Sizes)> temp_bytes;
  std::function<void(const Pointers&, Sizes, prim::TempStorage, CUstream)> run;
  const Kernel* kernel = nullptr;
};

#ifdef KILN_PYTHON_PRIMITIVES

template <typename Plan, typename Temp, typename Run>
std::shared_ptr<Primitive> wrap(Registry& registry, Temp temp, Run run) {
  auto plan = std::make_shared<Plan>(registry);
  auto out = std::make_shared<Primitive>();
  out->name = std::string(plan->kernel().name);
  out->plan = plan;
  out->temp_bytes = [plan, temp](Sizes s) { return temp(*plan, s); };
  out->run = [plan, run](const Pointers& p, Sizes s, prim::TempStorage t, CUstream stream) {
    run(*plan, p, s, t, stream);
  };
  out->kernel = &plan->kernel();
  return out;
}

// temp_bytes(n) of a plan sized by its item count, or by its segment count.
constexpr auto by_items = [](const auto& plan, Sizes s) { return plan.temp_bytes(s.n); };
constexpr auto by_segments = [](const auto& plan, Sizes s) { return plan.temp_bytes(s.m); };

template <typename T>
std::shared_ptr<Primitive> exclusive_sum(Registry& r) {
  return wrap<prim::ExclusiveSum<T>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                     prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), s.n, t, stream);
  });
}

template <typename T>
std::shared_ptr<Primitive> reduce_sum(Registry& r) {
  return wrap<prim::ReduceSum<T>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                  prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), s.n, t, stream);
  });
}

template <typename T, prim::ReduceOp Op>
std::shared_ptr<Primitive> segmented_reduce(Registry& r) {
  return wrap<prim::SegmentedReduce<T, Op>>(r, by_segments, [](const auto& plan, const Pointers& p, Sizes s,
                                                               prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), s.m, pointer_at<const std::int32_t>(p[2]), t, stream);
  });
}

template <typename K>
std::shared_ptr<Primitive> merge_sort_pairs(Registry& r) {
  return wrap<prim::MergeSortPairs<K>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                       prim::TempStorage t, CUstream stream) {
    plan(pointer_at<K>(p[0]), pointer_at<std::int32_t>(p[1]), s.n, t, stream);
  });
}

template <typename K>
std::shared_ptr<Primitive> unique_by_key(Registry& r) {
  return wrap<prim::UniqueByKey<K>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                    prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const K>(p[0]), pointer_at<const std::int32_t>(p[1]), pointer_at<K>(p[2]), pointer_at<std::int32_t>(p[3]),
         pointer_at<std::uint64_t>(p[4]), s.n, t, stream);
  });
}

template <typename K>
std::shared_ptr<Primitive> radix_sort_pairs(Registry& r) {
  return wrap<prim::RadixSortPairs<K>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                       prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const K>(p[0]), pointer_at<K>(p[1]), pointer_at<const std::int32_t>(p[2]), pointer_at<std::int32_t>(p[3]), s.n, t, stream);
  });
}

template <typename I>
std::shared_ptr<Primitive> select_indices(Registry& r) {
  return wrap<prim::SelectIndices<I>>(r, by_items, [](const auto& plan, const Pointers& p, Sizes s,
                                                      prim::TempStorage t, CUstream stream) {
    plan(pointer_at<const std::uint8_t>(p[0]), pointer_at<I>(p[1]), pointer_at<I>(p[2]), s.n, t, stream);
  });
}

// Searches need no temporary storage: n is the haystack's size, m the needles'.
template <typename T, prim::Side S>
std::shared_ptr<Primitive> sorted_search(Registry& r) {
  return wrap<prim::SortedSearch<T, S>>(r, [](const auto&, Sizes) { return std::size_t{0}; },
                                        [](const auto& plan, const Pointers& p, Sizes s, prim::TempStorage,
                                           CUstream stream) {
                                          plan(pointer_at<const T>(p[0]), s.n, pointer_at<const T>(p[1]), pointer_at<std::int64_t>(p[2]), s.m,
                                               stream);
                                        });
}

template <typename K>
std::shared_ptr<Primitive> segmented_sort(Registry& r) {
  return wrap<prim::SegmentedSort<K>>(r, [](const auto& plan, Sizes s) { return plan.temp_bytes(s.n, s.m); },
                                      [](const auto& plan, const Pointers& p, Sizes s, prim::TempStorage t,
                                         CUstream stream) {
                                        plan(pointer_at<const K>(p[0]), pointer_at<K>(p[1]), s.n, s.m, pointer_at<const std::int32_t>(p[2]), t,
                                             stream);
                                      });
}

using Factory = std::shared_ptr<Primitive> (*)(Registry&);

// NumPy's dtype name of a type the primitives' table may name (codegen/plan_types.py's six).
template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::uint32_t>) return "uint32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  else if constexpr (std::is_same_v<T, float>) return "float32";
  else {
    static_assert(std::is_same_v<T, double>, "a type of the primitives' table has no NumPy name here");
    return "float64";
  }
}

// Every (primitive, type) libkiln_prim instantiates: the lists kiln-gen writes from kernels/primitives.toml
// (kiln/prim/plan_types.hpp), so a row of the table reaches Python with no edit here. A type is NumPy's
// dtype name of the primitive's keys or items (for select, of its indices).
const std::map<std::pair<std::string, std::string>, Factory>& factories() {
#define KILN_PY_ONE_TYPE(name, function, T) {{name, dtype_name<T>()}, &function<T>},
#define KILN_PY_EXCLUSIVE_SUM(T) KILN_PY_ONE_TYPE("exclusive_sum", exclusive_sum, T)
#define KILN_PY_REDUCE_SUM(T) KILN_PY_ONE_TYPE("reduce_sum", reduce_sum, T)
#define KILN_PY_MERGE_SORT_PAIRS(T) KILN_PY_ONE_TYPE("merge_sort_pairs", merge_sort_pairs, T)
#define KILN_PY_UNIQUE_BY_KEY(T) KILN_PY_ONE_TYPE("unique_by_key", unique_by_key, T)
#define KILN_PY_RADIX_SORT_PAIRS(T) KILN_PY_ONE_TYPE("radix_sort_pairs", radix_sort_pairs, T)
#define KILN_PY_SELECT_INDICES(T) KILN_PY_ONE_TYPE("select_indices", select_indices, T)
#define KILN_PY_SEGMENTED_SORT(T) KILN_PY_ONE_TYPE("segmented_sort", segmented_sort, T)
#define KILN_PY_SEGMENTED_REDUCE(T, Op) {{"segmented_" #Op, dtype_name<T>()}, &segmented_reduce<T, prim::ReduceOp::Op>},
#define KILN_PY_SORTED_SEARCH(T, Bound) {{#Bound "_bound", dtype_name<T>()}, &sorted_search<T, prim::Side::Bound>},
  static const std::map<std::pair<std::string, std::string>, Factory> table = {
      KILN_PRIM_EXCLUSIVE_SUM_TYPES(KILN_PY_EXCLUSIVE_SUM)
      KILN_PRIM_REDUCE_SUM_TYPES(KILN_PY_REDUCE_SUM)
      KILN_PRIM_SEGMENTED_REDUCE_TYPES(KILN_PY_SEGMENTED_REDUCE)
      KILN_PRIM_MERGE_SORT_PAIRS_TYPES(KILN_PY_MERGE_SORT_PAIRS)
      KILN_PRIM_UNIQUE_BY_KEY_TYPES(KILN_PY_UNIQUE_BY_KEY)
      KILN_PRIM_RADIX_SORT_PAIRS_TYPES(KILN_PY_RADIX_SORT_PAIRS)
      KILN_PRIM_SELECT_INDICES_TYPES(KILN_PY_SELECT_INDICES)
      KILN_PRIM_SORTED_SEARCH_TYPES(KILN_PY_SORTED_SEARCH)
      KILN_PRIM_SEGMENTED_SORT_TYPES(KILN_PY_SEGMENTED_SORT)
  };
#undef KILN_PY_ONE_TYPE
#undef KILN_PY_EXCLUSIVE_SUM
#undef KILN_PY_REDUCE_SUM
#undef KILN_PY_MERGE_SORT_PAIRS
#undef KILN_PY_UNIQUE_BY_KEY
#undef KILN_PY_RADIX_SORT_PAIRS
#undef KILN_PY_SELECT_INDICES
#undef KILN_PY_SEGMENTED_SORT
#undef KILN_PY_SEGMENTED_REDUCE
#undef KILN_PY_SORTED_SEARCH
  return table;
}

const Catalog* primitives_catalog() { return &prim::catalog(); }
// The primitives' own registry of `device`, which their C++ one-shot calls use too: one per device.
Registry& primitives_registry(int device) { return prim::registry(device); }

#else  // a package built without libkiln_prim (-Dprimitives=false, or -Dpython=only without -Dprimitives=true)

using Factory = std::shared_ptr<Primitive> (*)(Registry&);

const std::map<std::pair<std::string, std::string>, Factory>& factories() {
  static const std::map<std::pair<std::string, std::string>, Factory> none;
  return none;
}

[[noreturn]] const Catalog* primitives_catalog() {
  throw Error(Errc::catalog,
              "this kiln package was built without the primitives: configure kiln with -Dprimitives=true "
              "(pip install -Csetup-args=-Dprimitives=true .)");
}
[[noreturn]] Registry& primitives_registry(int) {
  primitives_catalog();
}

#endif

// The primitive for (name, type) on `device`, made once per process: its kernels resolved then.
std::shared_ptr<Primitive> primitive_for(const std::string& name, const std::string& type, int device) {
  primitives_catalog();  // a package without the primitives says so here
  auto factory = factories().find({name, type});
  if (factory == factories().end()) {
    std::string types;
    for (const auto& [key, unused] : factories())
      if (key.first == name) types += (types.empty() ? "" : ", ") + key.second;
    const std::string why = types.empty() ? "no such primitive" : "no " + type + " (it takes " + types + ")";
    throw Error(Errc::invalid_argument, "kiln." + name + ": " + why);
  }
  static std::mutex mutex;
  // Kept for the process, as the registries they use are.
  static auto* made = new std::map<std::tuple<std::string, std::string, int>, std::shared_ptr<Primitive>>();
  std::lock_guard lock(mutex);
  auto& slot = (*made)[{name, type, device}];
  if (!slot) {
    Registry& registry = primitives_registry(device);
    slot = factory->second(registry);
    slot->device = device;
    slot->registry = &registry;
  }
  return slot;
}

Pointers to_pointers(const std::vector<std::uintptr_t>& pointers) {
  Pointers out{};
  if (pointers.size() > out.size())
    throw Error(Errc::invalid_argument, std::to_string(pointers.size()) + " pointers; a primitive takes at most 5");
  for (std::size_t i = 0; i < pointers.size(); ++i) out[i] = pointers[i];
  return out;
}

}  // namespace

void bind_primitives(py::module_& m) {
  py::class_<Primitive, std::shared_ptr<Primitive>>(
      m, "_Primitive", "One of libkiln_prim's plans on one device, over raw pointers (kiln.primitives checks arrays).")
      .def_readonly("name", &Primitive::name)
      .def_readonly("device", &Primitive::device)
      .def_property_readonly("source",
                             [](const Primitive& p) { return std::string(to_string(p.kernel->provenance.source)); },
                             "the tier its kernels' binary came from: embedded, disk, remote, ptx or jit")
      .def_property_readonly("arch", [](const Primitive& p) { return p.kernel->provenance.arch; })
      .def("temp_bytes", [](const Primitive& p, std::size_t n, std::size_t m) { return p.temp_bytes({n, m}); },
           py::arg("n"), py::arg("m") = 0)
      .def(
          "run",
          [](const Primitive& p, const std::vector<std::uintptr_t>& pointers, std::size_t n, std::size_t m,
             std::uintptr_t temp, std::size_t temp_bytes, const py::handle& stream) {
            Pointers at = to_pointers(pointers);
            CUstream s = to_stream(stream);
            py::gil_scoped_release unlocked;
            p.run(at, {n, m}, {reinterpret_cast<void*>(temp), temp_bytes}, s);
          },
          py::arg("pointers"), py::arg("n"), py::arg("m"), py::arg("temp"), py::arg("temp_bytes"),
          py::arg("stream") = py::none(), "A call with the caller's temporary storage (checked against temp_bytes).")
      .def(
          "run_once",
          [](const Primitive& p, const std::vector<std::uintptr_t>& pointers, std::size_t n, std::size_t m,
             const py::handle& stream) {
            Pointers at = to_pointers(pointers);
            CUstream s = to_stream(stream);
            py::gil_scoped_release unlocked;
#ifdef KILN_PYTHON_PRIMITIVES
            prim::detail::ContextScope scope(*p.registry);
            StreamStorage temp(p.temp_bytes({n, m}), s);
            p.run(at, {n, m}, temp.storage(), s);
#else
            (void)at, (void)p, (void)s, (void)n, (void)m;  // no Primitive exists without libkiln_prim
#endif
          },
          py::arg("pointers"), py::arg("n"), py::arg("m"), py::arg("stream") = py::none(),
          "A call with stream-ordered temporary storage (cuMemAllocAsync), as C++'s one-shot functions: what a "
          "one-shot call uses when the arrays' library cannot give its storage in the stream's order.")
      .def(
          "_run_repeated",
          [](const Primitive& p, const std::vector<std::uintptr_t>& pointers, std::size_t n, std::size_t m,
             std::uintptr_t temp, std::size_t temp_bytes, const py::handle& stream, int times) {
            Pointers at = to_pointers(pointers);
            CUstream s = to_stream(stream);
            py::gil_scoped_release unlocked;
            for (int i = 0; i < times; ++i) p.run(at, {n, m}, {reinterpret_cast<void*>(temp), temp_bytes}, s);
          },
          py::arg("pointers"), py::arg("n"), py::arg("m"), py::arg("temp"), py::arg("temp_bytes"), py::arg("stream"),
          py::arg("times"), "run() `times` times from C++: the plan's own rate, for bench/python_prims.py.");

  m.def(
      "_primitive",
      [](const std::string& name, const std::string& type, const py::handle& device) {
        const int ordinal = device_ordinal(device);
        py::gil_scoped_release unlocked;  // the first one of a kind may compile (JIT tier)
        return primitive_for(name, type, ordinal);
      },
      py::arg("name"), py::arg("type"), py::arg("device"));
  m.def(
      "_primitive_types",
      [] {
        std::map<std::string, std::vector<std::string>> out;
        for (const auto& [key, unused] : factories()) out[key.first].push_back(key.second);
        return out;
      },
      "{primitive: [NumPy dtype names]}: what this package's libkiln_prim instantiates (empty without it).");
  m.def(
      "primitives_registry",
      [](const py::handle& device) { return PyRegistry{&primitives_registry(device_ordinal(device))}; },
      py::arg("device") = py::none(),
      "The registry of kiln's primitives on `device` (kernels/primitives.toml): precompile, warm-up, status.");
}

const Catalog* built_primitives_catalog() {
  try {
    return primitives_catalog();
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace kiln::python
