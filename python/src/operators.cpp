// kiln.Operator and kiln._OperatorPlan: libkiln_prim's plans with operators given at run time
// (kiln/prim/operator.hpp: ReduceWith, ...) over raw device pointers, for python/kiln/operators.py, which
// checks the arrays (docs/DESIGN.md, "Operators from Python").
#include "bindings.hpp"
#include "launch_args.hpp"
#include "stream_storage.hpp"

#include <kiln/error.hpp>
#include <kiln/prim/storage.hpp>  // header-only: TempStorage

#include <pybind11/stl.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <kiln/prim/common.hpp>
#include <kiln/prim/detail/plan.hpp>  // ContextScope
#include <kiln/prim/operator.hpp>     // declarations: called only where libkiln_prim is linked in

namespace py = pybind11;

namespace kiln::python {
namespace {

// The longest operator text taken: an operator is a function or a few, not a program.
constexpr std::size_t kMaxOperatorBytes = 1 << 20;

// An operator as Python gives it: a definition of a __device__ function `name`, or an expression (or a
// function body with `return`) over the parameters the plan passes (a, b; or x), which kiln wraps in a
// function of the plan's signature once the dtype is known.
struct PyOperator {
  std::string source;
  std::string name;  // empty: "op", or for an expression the role's own name
  bool expression = false;
};

bool is_identifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

bool is_identifier_char(char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); }

// Whether `text` holds `word` as a whole C++ token.
bool has_word(std::string_view text, std::string_view word) {
  for (std::size_t at = text.find(word); at != std::string_view::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !is_identifier_char(text[at - 1]);
    const std::size_t end = at + word.size();
    if (starts && (end == text.size() || !is_identifier_char(text[end]))) return true;
  }
  return false;
}

PyOperator make_operator(const py::handle& source, const py::handle& name) {
  if (!py::isinstance<py::str>(source))
    throw ArgumentTypeError("kiln.Operator: the source is a " +
                            std::string(py::str(py::type::handle_of(source).attr("__name__"))) +
                            ", not a str of CUDA C++ (a __device__ function, or an expression such as \"a + b\")");
  PyOperator op;
  op.source = source.cast<std::string>();
  if (op.source.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ArgumentError("kiln.Operator: the source is empty");
  if (op.source.size() > kMaxOperatorBytes)
    throw ArgumentError("kiln.Operator: the source has " + std::to_string(op.source.size()) + " bytes; at most " +
                        std::to_string(kMaxOperatorBytes) + " are taken");
  if (op.source.find('\0') != std::string::npos) throw ArgumentError("kiln.Operator: the source holds a NUL byte");
  op.expression = !has_word(op.source, "__device__");
  if (!name.is_none()) {
    if (!py::isinstance<py::str>(name))
      throw ArgumentTypeError("kiln.Operator: name is a " +
                              std::string(py::str(py::type::handle_of(name).attr("__name__"))) + ", not a str");
    op.name = name.cast<std::string>();
    if (!is_identifier(op.name))
      throw ArgumentError("kiln.Operator: name '" + op.name + "' is not a C++ identifier");
  }
  if (!op.expression && !has_word(op.source, op.name.empty() ? "op" : op.name))
    throw ArgumentError("kiln.Operator: the source defines no function '" + (op.name.empty() ? "op" : op.name) +
                        "'; give the name of the __device__ function the plan calls: kiln.Operator(source, "
                        "name=...)");
  return op;
}

// One operator's role in a plan: the function's result and parameters in C++ spelling (T for the dtype),
// and the name an expression's function gets.
struct Role {
  const char* result;
  std::vector<const char*> args;
  const char* default_name;
};

// The families that take operators, and their operators' roles, as kiln/prim/operator.hpp's plans call them.
const std::map<std::string, std::vector<Role>>& family_roles() {
  static const std::map<std::string, std::vector<Role>> roles = {
      {"reduce", {{"T", {"T", "T"}, "op"}}},
      {"exclusive_scan", {{"T", {"T", "T"}, "op"}}},
      {"inclusive_scan", {{"T", {"T", "T"}, "op"}}},
      {"segmented_reduce", {{"T", {"T", "T"}, "op"}}},
      {"transform", {{"T", {"T"}, "op"}}},
      {"transform_reduce", {{"T", {"T"}, "transform_op"}, {"T", {"T", "T"}, "reduce_op"}}},
      {"merge_sort_pairs", {{"bool", {"T", "T"}, "op"}}},
      {"unique_by_key", {{"bool", {"T", "T"}, "op"}}},
      {"select_if", {{"bool", {"T"}, "op"}}},
  };
  return roles;
}

// The dtypes of the ...With plans, as NumPy names them; bytes16 (kiln::prim::Bytes16) carries only structs.
constexpr std::size_t kTypes = 7;
constexpr const char* kDtypes[kTypes] = {"int32", "uint32", "int64", "uint64", "float32", "float64", "bytes16"};

// A dtype as the linked rows spell it (kernels/primitives.toml), which an operator's function names.
const char* cuda_spelling(std::size_t dtype) {
  using prim::operator_type_spelling;
  static const char* const spellings[kTypes] = {
      operator_type_spelling<std::int32_t>(), operator_type_spelling<std::uint32_t>(),
      operator_type_spelling<std::int64_t>(), operator_type_spelling<std::uint64_t>(),
      operator_type_spelling<float>(),        operator_type_spelling<double>(),
      operator_type_spelling<prim::Bytes16>()};
  return spellings[dtype];
}

// `op` for `role` on the dtype spelled `t`: a definition as it is; an expression (or a body with `return`)
// wrapped in a __device__ function of the role's signature, its parameters a, b (binary) or x (unary), T
// the dtype.
prim::LinkedCall to_linked(const PyOperator& op, const Role& role, const std::string& t) {
  auto spelled = [&](const char* type) { return std::string_view(type) == "T" ? t : std::string(type); };
  prim::LinkedCall call{{op.source, op.name.empty() ? "op" : op.name}, spelled(role.result), {}};
  for (const char* arg : role.args) call.args.push_back(spelled(arg));
  if (!op.expression) return call;
  call.op.name = op.name.empty() ? role.default_name : op.name;
  static const char* const kParameters[2][2] = {{"x", nullptr}, {"a", "b"}};
  std::string text = "__device__ " + call.result + " " + call.op.name + "(";
  for (std::size_t i = 0; i < call.args.size(); ++i)
    text += (i ? ", " : "") + call.args[i] + " " + kParameters[call.args.size() - 1][i];
  // The text on lines of its own, numbered from 1 as the caller wrote it: NVRTC's log points into it, and a
  // // comment in it ends at its own line.
  const bool body = has_word(op.source, "return");
  text += ") { using T = " + t + ";" + (body ? "" : " return (") + "\n#line 1\n" + op.source + "\n" +
          (body ? "}" : "); }");
  call.op.source = text;
  return call;
}

// An item type the plan's kernels know only by its size: a struct (python/kiln/structs.py renders it from a
// NumPy structured dtype) whose items travel through the kernels of the unsigned type of its size as their
// bytes. Empty: the dtype's own type.
struct ItemStruct {
  std::string name;         // the struct's C++ name
  std::string declaration;  // the struct (and those it nests) with its layout's static_asserts, then `using T`
};

// `op` for `role` over the struct `item`, whose items the kernels pass as `carrier` (the unsigned type of its
// size): the struct's declaration, the operator as the caller wrote it over the struct (T), and a function of
// the role's signature over the carrier, named kiln_bits_<name>, that hands the operator the struct and
// returns its result's bytes.
prim::LinkedCall over_struct(const PyOperator& op, const Role& role, const std::string& carrier,
                             const ItemStruct& item) {
  prim::LinkedCall inner = to_linked(op, role, item.name);
  prim::LinkedCall call{{"", "kiln_bits_" + inner.op.name}, role.result == std::string_view("T") ? carrier : inner.result,
                        std::vector<std::string>(role.args.size(), carrier)};
  std::string text =
      "#line 1 \"kiln: the struct of the items\"\n" + item.declaration +
      "#ifndef KILN_BITS_AS\n#define KILN_BITS_AS\n"
      "template <typename To, typename From> __device__ inline To kiln_bits_as(const From& from) {\n"
      "  static_assert(sizeof(To) == sizeof(From), \"kiln: a struct's items travel as an integer of its size\");\n"
      "  To to;\n  memcpy(&to, &from, sizeof to);\n  return to;\n}\n#endif\n"
      "#line 1 \"operator " + inner.op.name + "\"\n" + inner.op.source + "\n" +
      "#line 1 \"kiln: operator '" + inner.op.name + "' over the bytes of " + carrier + "\"\n" +
      "__device__ " + call.result + " " + call.op.name + "(";
  std::string args;
  for (std::size_t i = 0; i < call.args.size(); ++i) {
    text += (i ? ", " : "") + carrier + " a" + std::to_string(i);
    args += std::string(i ? ", " : "") + "kiln_bits_as<" + item.name + ">(a" + std::to_string(i) + ")";
  }
  // The result through a typed variable: an operator returning another type is an error naming both.
  const bool bits = call.result == carrier;
  text += ") {\n  const " + std::string(bits ? item.name : inner.result) + " result = " + inner.op.name + "(" + args +
          ");\n  return " + (bits ? "kiln_bits_as<" + carrier + ">(result)" : "result") + ";\n}\n";
  call.op.source = std::move(text);
  return call;
}

// One plan of kiln/prim/operator.hpp behind a uniform call, so that Python needs one class for all of
// them: its device pointers in the family's order, its size (items, or segments), the init value's bytes
// where the family takes one. Const calls only read the plan: one serves every caller and stream.
struct OperatorPlan {
  std::string family;
  std::string dtype;
  int device = 0;
  Registry* registry = nullptr;
  std::size_t arrays = 0;     // how many pointers a call takes
  std::size_t init_bytes = 0;  // the init value's size; 0: the family takes none
  std::shared_ptr<const void> plan;
  std::function<std::size_t(std::size_t)> temp_bytes;
  std::function<void(const std::vector<std::uintptr_t>&, std::size_t, const std::string&, prim::TempStorage, CUstream)>
      run;
  const Kernel* kernel = nullptr;
};

using Ops = std::vector<prim::Operator>;
using OperatorFactory = std::shared_ptr<OperatorPlan> (*)(const Ops&, Registry&);

// A family's plans, by dtype in kDtypes' order.
struct OperatorFamily {
  OperatorFactory factories[kTypes];
};

#ifdef KILN_PYTHON_PRIMITIVES

template <typename T>
T init_of(const std::string& bytes) {
  T value;
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

template <typename Plan, typename Run>
std::shared_ptr<OperatorPlan> wrap(std::shared_ptr<const Plan> plan, std::size_t arrays, std::size_t init_bytes,
                                   Run run) {
  auto out = std::make_shared<OperatorPlan>();
  out->arrays = arrays;
  out->init_bytes = init_bytes;
  out->plan = plan;
  out->temp_bytes = [plan](std::size_t n) { return plan->temp_bytes(n); };
  out->run = [plan, run](const std::vector<std::uintptr_t>& p, std::size_t n, const std::string& init,
                         prim::TempStorage t, CUstream stream) { run(*plan, p, n, init, t, stream); };
  out->kernel = &plan->kernel();
  return out;
}

template <typename T>
std::shared_ptr<OperatorPlan> reduce(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::ReduceWith<T>>(ops[0], r), 2, sizeof(T),
              [](const auto& plan, const auto& p, std::size_t n, const std::string& init, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, init_of<T>(init), t, s); });
}

template <typename T>
std::shared_ptr<OperatorPlan> exclusive_scan(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::ExclusiveScanWith<T>>(ops[0], r), 2, sizeof(T),
              [](const auto& plan, const auto& p, std::size_t n, const std::string& init, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, init_of<T>(init), t, s); });
}

template <typename T>
std::shared_ptr<OperatorPlan> inclusive_scan(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::InclusiveScanWith<T>>(ops[0], r), 2, 0,
              [](const auto& plan, const auto& p, std::size_t n, const std::string&, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, t, s); });
}

// A transform takes no temporary storage: its plan's calls have none.
template <typename T>
std::shared_ptr<OperatorPlan> transform(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::TransformWith<T>>(ops[0], r), 2,
              0, [](const auto& plan, const auto& p, std::size_t n, const std::string&, prim::TempStorage,
                    CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, s); });
}

template <typename T>
std::shared_ptr<OperatorPlan> transform_reduce(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::TransformReduceWith<T>>(ops[0], ops[1], r),
              2, sizeof(T),
              [](const auto& plan, const auto& p, std::size_t n, const std::string& init, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, init_of<T>(init), t, s); });
}

// Sized by its segments: n is num_segments here.
template <typename T>
std::shared_ptr<OperatorPlan> segmented_reduce(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::SegmentedReduceWith<T>>(ops[0], r), 3, sizeof(T),
              [](const auto& plan, const auto& p, std::size_t n, const std::string& init, prim::TempStorage t,
                 CUstream s) {
                plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), n, pointer_at<const std::int32_t>(p[2]), init_of<T>(init), t, s);
              });
}

template <typename K>
std::shared_ptr<OperatorPlan> merge_sort_pairs(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::MergeSortPairsWith<K>>(ops[0], r), 2, 0,
              [](const auto& plan, const auto& p, std::size_t n, const std::string&, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<K>(p[0]), pointer_at<std::int32_t>(p[1]), n, t, s); });
}

template <typename T>
std::shared_ptr<OperatorPlan> select_if(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::SelectIfWith<T>>(ops[0], r), 3, 0,
              [](const auto& plan, const auto& p, std::size_t n, const std::string&, prim::TempStorage t,
                 CUstream s) { plan(pointer_at<const T>(p[0]), pointer_at<T>(p[1]), pointer_at<std::int64_t>(p[2]), n, t, s); });
}

template <typename K>
std::shared_ptr<OperatorPlan> unique_by_key(const Ops& ops, Registry& r) {
  return wrap(std::make_shared<const prim::UniqueByKeyWith<K>>(ops[0], r), 5, 0,
              [](const auto& plan, const auto& p, std::size_t n, const std::string&, prim::TempStorage t,
                 CUstream s) {
                plan(pointer_at<const K>(p[0]), pointer_at<const std::int32_t>(p[1]), pointer_at<K>(p[2]), pointer_at<std::int32_t>(p[3]),
                     pointer_at<std::uint64_t>(p[4]), n, t, s);
              });
}

#define KILN_PY_BY_DTYPE(f) \
  { &f<std::int32_t>, &f<std::uint32_t>, &f<std::int64_t>, &f<std::uint64_t>, &f<float>, &f<double>, &f<prim::Bytes16> }
const std::map<std::string, OperatorFamily>& families() {
  static const std::map<std::string, OperatorFamily> table = {
      {"reduce", {KILN_PY_BY_DTYPE(reduce)}},
      {"exclusive_scan", {KILN_PY_BY_DTYPE(exclusive_scan)}},
      {"inclusive_scan", {KILN_PY_BY_DTYPE(inclusive_scan)}},
      {"transform", {KILN_PY_BY_DTYPE(transform)}},
      {"transform_reduce", {KILN_PY_BY_DTYPE(transform_reduce)}},
      {"segmented_reduce", {KILN_PY_BY_DTYPE(segmented_reduce)}},
      {"merge_sort_pairs", {KILN_PY_BY_DTYPE(merge_sort_pairs)}},
      {"select_if", {KILN_PY_BY_DTYPE(select_if)}},
      {"unique_by_key", {KILN_PY_BY_DTYPE(unique_by_key)}},
  };
  return table;
}
#undef KILN_PY_BY_DTYPE

Registry& operators_registry(int device) { return prim::registry(device); }

LinkedSource linked_source(const std::vector<prim::LinkedCall>& calls, const std::string& plan) {
  return prim::linked_operators_source(calls, plan);
}

void run_once(const OperatorPlan& p, const std::vector<std::uintptr_t>& pointers, std::size_t n,
              const std::string& init, CUstream stream) {
  prim::detail::ContextScope scope(*p.registry);
  StreamStorage temp(p.temp_bytes(n), stream);
  p.run(pointers, n, init, temp.storage(), stream);
}

#else  // built without libkiln_prim: no plan can be made

const std::map<std::string, OperatorFamily>& families() {
  static const std::map<std::string, OperatorFamily> none;
  return none;
}

[[noreturn]] Registry& operators_registry(int) {
  throw Error(Errc::catalog,
              "this kiln package was built without the primitives: configure kiln with -Dprimitives=true "
              "(pip install -Csetup-args=-Dprimitives=true .)");
}

[[noreturn]] LinkedSource linked_source(const std::vector<prim::LinkedCall>&, const std::string&) {
  operators_registry(0);
}

void run_once(const OperatorPlan&, const std::vector<std::uintptr_t>&, std::size_t, const std::string&, CUstream) {}

#endif

// A struct's items are carried by uint32, uint64 or bytes16; its name is an identifier, its declaration text.
void check_struct(const std::string& family, const std::string& dtype, const ItemStruct& item) {
  if (dtype != "uint32" && dtype != "uint64" && dtype != "bytes16")
    throw ArgumentTypeError("kiln." + family + ": a struct's items are carried as uint32, uint64 or bytes16, not " +
                            dtype);
  if (!is_identifier(item.name))
    throw ArgumentError("kiln." + family + ": the struct's name '" + item.name + "' is not a C++ identifier");
  if (item.declaration.size() > kMaxOperatorBytes || item.declaration.find('\0') != std::string::npos)
    throw ArgumentError("kiln." + family + ": the struct's declaration is over " +
                        std::to_string(kMaxOperatorBytes) + " bytes or holds a NUL byte");
}

// The operators of `family` for `dtype` as its plan calls them (expressions wrapped), and the dtype's index
// in kDtypes; ArgumentError or ArgumentTypeError for a family, dtype or number of operators not taken.
std::vector<prim::LinkedCall> linked_calls(const std::string& family, const std::string& dtype,
                                           const std::vector<PyOperator>& ops, std::size_t& type,
                                           const ItemStruct& item) {
  auto roles = family_roles().find(family);
  if (roles == family_roles().end()) throw ArgumentError("kiln: no family '" + family + "' takes an operator");
  type = 0;
  while (type < kTypes && dtype != kDtypes[type]) ++type;
  if (type == kTypes || (dtype == "bytes16" && item.name.empty()))
    throw ArgumentTypeError("kiln." + family + ": no " + dtype +
                            " (operators take int32, uint32, int64, uint64, float32, float64)" +
                            (dtype == "bytes16" ? "; bytes16 carries only the items of a 16-byte struct: give the "
                                                  "struct's name and declaration (kiln/structs.py makes them)"
                                                : ""));
  if (ops.size() != roles->second.size())
    throw ArgumentError("kiln." + family + ": " + std::to_string(roles->second.size()) + " operator(s) expected, " +
                        std::to_string(ops.size()) + " given");
  if (!item.name.empty()) check_struct(family, dtype, item);
  std::vector<prim::LinkedCall> calls;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    calls.push_back(item.name.empty() ? to_linked(ops[i], roles->second[i], cuda_spelling(type))
                                      : over_struct(ops[i], roles->second[i], cuda_spelling(type), item));
  }
  return calls;
}

// A plan's key: its family, dtype, device, each operator's text, name and form, and the struct of its items.
using PlanKey = std::tuple<std::string, std::string, int, std::vector<std::tuple<std::string, std::string, bool>>,
                           std::string, std::string>;

// The plan of `family` for `dtype` with `ops` on `device`, made once per process (its operators linked
// then: memory, disk, remote or a compile). Different operators are made concurrently; the same one once.
std::shared_ptr<OperatorPlan> plan_for(const std::string& family, const std::string& dtype,
                                       const std::vector<PyOperator>& ops, int device, const ItemStruct& item) {
  std::size_t type = 0;
  const std::vector<prim::LinkedCall> calls = linked_calls(family, dtype, ops, type, item);
  auto found = families().find(family);
  if (found == families().end()) operators_registry(device);  // a package without the primitives says so here
  PlanKey key{family, dtype, device, {}, item.name, item.declaration};
  for (const PyOperator& op : ops) std::get<3>(key).emplace_back(op.source, op.name, op.expression);

  struct Slot {
    std::mutex mutex;
    std::shared_ptr<OperatorPlan> plan;
  };
  static std::mutex mutex;
  static auto* slots = new std::map<PlanKey, std::shared_ptr<Slot>>();  // kept for the process, as the registry's links
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(mutex);
    auto& s = (*slots)[key];
    if (!s) s = std::make_shared<Slot>();
    slot = s;
  }
  std::lock_guard lock(slot->mutex);
  if (!slot->plan) {
    Registry& registry = operators_registry(device);
    Ops linked;
    for (const prim::LinkedCall& call : calls) linked.push_back(call.op);
    auto made = found->second.factories[type](linked, registry);
    made->family = family;
    made->dtype = dtype;
    made->device = device;
    made->registry = &registry;
    slot->plan = std::move(made);
  }
  return slot->plan;
}

void check_call(const OperatorPlan& p, const std::vector<std::uintptr_t>& pointers, const std::string& init) {
  if (pointers.size() != p.arrays)
    throw ArgumentError("kiln." + p.family + ": " + std::to_string(pointers.size()) + " arrays; it takes " +
                        std::to_string(p.arrays));
  if (init.size() != p.init_bytes)
    throw ArgumentError("kiln." + p.family + ": init of " + std::to_string(init.size()) + " bytes; it takes " +
                        (p.init_bytes ? std::to_string(p.init_bytes) + " (one " + p.dtype + ")" : "none"));
}

}  // namespace

void bind_operators(py::module_& m) {
  py::class_<PyOperator>(m, "Operator",
                         "An operator given as CUDA C++ text, reused across calls: a __device__ function (`name`, "
                         "\"op\" unless given) or an expression over the plan's parameters (a, b; x for a "
                         "unary one) that kiln wraps in a function of the plan's signature.")
      .def(py::init([](const py::handle& source, const py::handle& name) { return make_operator(source, name); }),
           py::arg("source"), py::arg("name") = py::none())
      .def_readonly("source", &PyOperator::source)
      .def_property_readonly("name", [](const PyOperator& op) { return op.name.empty() ? std::string("op") : op.name; })
      .def_readonly("expression", &PyOperator::expression,
                    "True when the source is an expression or a body kiln wraps, False for a definition")
      .def("__repr__", [](const PyOperator& op) {
        std::string shown = op.source.size() <= 60 ? op.source : op.source.substr(0, 57) + "...";
        return "kiln.Operator(" + std::string(py::repr(py::str(shown))) + ", name=" +
               std::string(py::repr(py::str(op.name.empty() ? "op" : op.name))) + ")";
      })
      .def("_key", [](const PyOperator& op) { return py::make_tuple(op.source, op.name, op.expression); });

  py::class_<OperatorPlan, std::shared_ptr<OperatorPlan>>(
      m, "_OperatorPlan", "A plan of libkiln_prim with operators linked in, on one device, over raw pointers.")
      .def_readonly("family", &OperatorPlan::family)
      .def_readonly("dtype", &OperatorPlan::dtype)
      .def_readonly("device", &OperatorPlan::device)
      .def_property_readonly("source",
                             [](const OperatorPlan& p) { return std::string(to_string(p.kernel->provenance.source)); },
                             "the tier its linked kernels came from: memory (this process), disk, remote or jit")
      .def_property_readonly("arch", [](const OperatorPlan& p) { return p.kernel->provenance.arch; })
      .def("temp_bytes", [](const OperatorPlan& p, std::size_t n) { return p.temp_bytes(n); }, py::arg("n"))
      .def(
          "run",
          [](const OperatorPlan& p, const std::vector<std::uintptr_t>& pointers, std::size_t n, const py::bytes& init,
             std::uintptr_t temp, std::size_t temp_bytes, const py::handle& stream) {
            const std::string value = init;
            check_call(p, pointers, value);
            CUstream s = to_stream(stream);
            py::gil_scoped_release unlocked;
            p.run(pointers, n, value, {reinterpret_cast<void*>(temp), temp_bytes}, s);
          },
          py::arg("pointers"), py::arg("n"), py::arg("init"), py::arg("temp"), py::arg("temp_bytes"),
          py::arg("stream") = py::none(), "A call with the caller's temporary storage (checked against temp_bytes).")
      .def(
          "run_once",
          [](const OperatorPlan& p, const std::vector<std::uintptr_t>& pointers, std::size_t n, const py::bytes& init,
             const py::handle& stream) {
            const std::string value = init;
            check_call(p, pointers, value);
            CUstream s = to_stream(stream);
            py::gil_scoped_release unlocked;
            run_once(p, pointers, n, value, s);
          },
          py::arg("pointers"), py::arg("n"), py::arg("init"), py::arg("stream") = py::none(),
          "A call with stream-ordered temporary storage (cuMemAllocAsync), as _Primitive.run_once.");

  m.def(
      "_operator_plan",
      [](const std::string& family, const std::string& dtype, const std::vector<PyOperator>& ops,
         const py::handle& device, const std::string& struct_name, const std::string& struct_declaration) {
        const int ordinal = device_ordinal(device);
        const ItemStruct item{struct_name, struct_declaration};
        py::gil_scoped_release unlocked;  // linking an operator may compile (JIT tier)
        return plan_for(family, dtype, ops, ordinal, item);
      },
      py::arg("family"), py::arg("dtype"), py::arg("operators"), py::arg("device"), py::arg("struct_name") = "",
      py::arg("struct_declaration") = "",
      "The plan of `family` for `dtype` with `operators` on `device`, made once per process; with a struct "
      "(kiln/structs.py), `dtype` is the unsigned type of its size, which carries its items.");
  m.def(
      "_operator_source",
      [](const std::string& family, const std::string& dtype, const std::vector<PyOperator>& ops,
         const std::string& struct_name, const std::string& struct_declaration) {
        std::size_t type = 0;
        const ItemStruct item{struct_name, struct_declaration};
        const std::vector<prim::LinkedCall> calls = linked_calls(family, dtype, ops, type, item);  // sets type
        return linked_source(calls, family + "<" + cuda_spelling(type) + ">").source;
      },
      py::arg("family"), py::arg("dtype"), py::arg("operators"), py::arg("struct_name") = "",
      py::arg("struct_declaration") = "",
      "The translation unit kiln compiles for these operators (kiln::prim::linked_operators_source): for tests "
      "and to see how an expression is wrapped.");
  m.def(
      "_operator_families",
      [] {
        std::map<std::string, std::size_t> out;
        for (const auto& [name, family] : families()) out[name] = family_roles().at(name).size();
        return out;
      },
      "{family: number of operators}: the plans with operators this package holds (empty without libkiln_prim).");
}

}  // namespace kiln::python
