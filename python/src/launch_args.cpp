// Python's launch arguments checked and laid out for cuLaunchKernel; each error names the argument.
//
// This is the launch path's cost on the host, so it reads what it needs with the C API: an argument's
// kind is found once per type (cached), a CuPy array's pointer is read from .data.ptr and a PyTorch
// tensor's from .data_ptr() rather than from __cuda_array_interface__ (a dict each library builds anew on
// every read), a NumPy scalar's bytes through the buffer protocol, and a missing attribute is looked up
// without an exception being made.
#include "launch_args.hpp"

#include "bindings.hpp"  // ArgumentError, ArgumentTypeError: kiln.Error and ValueError / TypeError
#include "dlpack.hpp"

#include <climits>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace py = pybind11;

namespace kiln::python {
namespace {

std::string type_name(const py::handle& value) { return py::str(py::type::handle_of(value).attr("__name__")); }

std::string arg_name(std::size_t index) { return "argument " + std::to_string(index); }

// Attribute names, interned once: the launch path looks them up by object, not by C string.
struct Names {
  PyObject* cuda_array_interface = PyUnicode_InternFromString("__cuda_array_interface__");
  PyObject* array_interface = PyUnicode_InternFromString("__array_interface__");
  PyObject* data = PyUnicode_InternFromString("data");
  PyObject* ptr = PyUnicode_InternFromString("ptr");
  PyObject* is_cuda = PyUnicode_InternFromString("is_cuda");
  PyObject* requires_grad = PyUnicode_InternFromString("requires_grad");
  PyObject* data_ptr = PyUnicode_InternFromString("data_ptr");
  PyObject* tobytes = PyUnicode_InternFromString("tobytes");
  PyObject* cuda_stream_protocol = PyUnicode_InternFromString("__cuda_stream__");
  PyObject* cuda_stream = PyUnicode_InternFromString("cuda_stream");
  PyObject* dlpack = PyUnicode_InternFromString("__dlpack__");
};

const Names& names() {
  static const Names* made = [] {
    auto* n = new Names;  // kept for the process, as interned strings are
    if (!n->cuda_array_interface || !n->array_interface || !n->data || !n->ptr || !n->is_cuda ||
        !n->requires_grad || !n->data_ptr || !n->tobytes || !n->cuda_stream_protocol || !n->cuda_stream || !n->dlpack)
      throw py::error_already_set();
    return n;
  }();
  return *made;
}

// getattr(object, name), or a null object when there is no such attribute: no AttributeError is made and
// cleared, as hasattr would. Other errors propagate.
py::object optional_attr(PyObject* object, PyObject* name) {
  PyObject* out = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  const int found = PyObject_GetOptionalAttr(object, name, &out);
#else
  const int found = _PyObject_LookupAttr(object, name, &out);
#endif
  if (found < 0) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(out);
}

// What every instance of a type is as an argument. `other` types are looked at per instance (an object
// may carry __cuda_array_interface__ of its own).
enum class Kind : std::uint8_t { null, integer, real, numpy_scalar, cupy_array, torch_tensor, other };

// Whether `type` is `module.name` or derives from it; false while the module is not imported (none of its
// objects can exist then).
bool derives_from(PyTypeObject* type, const char* module, const char* name) {
  PyObject* loaded = PyDict_GetItemString(PyImport_GetModuleDict(), module);  // borrowed
  if (loaded == nullptr) return false;
  PyObject* base = PyObject_GetAttrString(loaded, name);
  if (base == nullptr) {
    PyErr_Clear();  // a version without it: its objects are then handled as any other
    return false;
  }
  const bool derives = PyType_Check(base) && PyType_IsSubtype(type, reinterpret_cast<PyTypeObject*>(base));
  Py_DECREF(base);
  return derives;
}

Kind classify(PyTypeObject* type) {
  if (type == Py_TYPE(Py_None)) return Kind::null;
  if (derives_from(type, "numpy", "generic")) return Kind::numpy_scalar;  // first: numpy.float64 is a float
  if (PyType_IsSubtype(type, &PyLong_Type)) return Kind::integer;        // bool too, as CuPy does
  if (PyType_IsSubtype(type, &PyFloat_Type)) return Kind::real;
  if (derives_from(type, "cupy", "ndarray")) return Kind::cupy_array;
  if (derives_from(type, "torch", "Tensor")) return Kind::torch_tensor;
  return Kind::other;
}

// The kind of a type, classified once. The cache holds a reference to each type (so an address is never
// another type's) and is small: the argument types a process launches with. Guarded by the GIL.
Kind kind_of(PyTypeObject* type) {
  static constexpr std::size_t kTypes = 64;
  static std::array<std::pair<PyTypeObject*, Kind>, kTypes> known;
  static std::size_t count = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (known[i].first == type) return known[i].second;
  const Kind kind = classify(type);
  if (count < kTypes) {
    Py_INCREF(type);
    known[count++] = {type, kind};
  }
  return kind;
}

// An int's 64 bits: int64, or an address above INT64_MAX as its unsigned value.
std::uint64_t int_bits(PyObject* value, std::size_t index) {
  int overflow = 0;
  const long long as_signed = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (overflow == 0) {
    if (as_signed == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<std::uint64_t>(as_signed);
  }
  if (overflow > 0) {
    const unsigned long long as_unsigned = PyLong_AsUnsignedLongLong(value);
    if (!(as_unsigned == ULLONG_MAX && PyErr_Occurred())) return as_unsigned;
    PyErr_Clear();
  }
  throw ArgumentError(arg_name(index) + ": " + std::string(py::str(value)) +
                        " does not fit 64 bits (a Python int is passed as int64)");
}

// The data pointer __cuda_array_interface__ gives (CuPy, PyTorch, Numba, ...).
std::uint64_t interface_pointer(PyObject* value, PyObject* cai, std::size_t index) {
  const py::handle object(value);
  PyObject* data = PyDict_Check(cai) ? PyDict_GetItemWithError(cai, names().data) : nullptr;  // borrowed
  if (data == nullptr) {
    if (PyErr_Occurred()) throw py::error_already_set();
    throw ArgumentError(arg_name(index) + " (" + type_name(object) + "): __cuda_array_interface__ has no 'data'");
  }
  if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1 || !PyLong_Check(PyTuple_GET_ITEM(data, 0)))
    throw ArgumentError(arg_name(index) + " (" + type_name(object) +
                          "): __cuda_array_interface__['data'] is not (pointer, read_only)");
  const unsigned long long pointer = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
  if (pointer == ULLONG_MAX && PyErr_Occurred()) {
    PyErr_Clear();
    throw ArgumentError(arg_name(index) + " (" + type_name(object) +
                          "): __cuda_array_interface__['data'][0] is not an address");
  }
  return pointer;
}

// CuPy's ndarray.data.ptr (what its __cuda_array_interface__ gives, views' offsets included); false when
// it is not there.
bool cupy_pointer(PyObject* value, std::uint64_t& pointer) {
  py::object memory = optional_attr(value, names().data);
  if (!memory) return false;
  py::object address = optional_attr(memory.ptr(), names().ptr);
  if (!address || !PyLong_Check(address.ptr())) return false;
  pointer = PyLong_AsUnsignedLongLong(address.ptr());
  if (pointer == ULLONG_MAX && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// A CUDA tensor's .data_ptr(); false for a tensor that __cuda_array_interface__ refuses (on the host, or
// one that requires grad), which the general path then names.
bool torch_pointer(PyObject* value, std::uint64_t& pointer) {
  py::object is_cuda = optional_attr(value, names().is_cuda);
  py::object requires_grad = optional_attr(value, names().requires_grad);
  if (is_cuda.ptr() != Py_True || requires_grad.ptr() != Py_False) return false;
  PyObject* address = PyObject_CallMethodNoArgs(value, names().data_ptr);
  if (address == nullptr) {
    PyErr_Clear();
    return false;
  }
  pointer = PyLong_AsUnsignedLongLong(address);
  Py_DECREF(address);
  if (pointer == ULLONG_MAX && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// A NumPy scalar's bytes (its dtype's), at most 16; returns how many.
std::size_t numpy_bytes(PyObject* value, std::uint64_t* slot, std::size_t index) {
  auto too_large = [&](std::size_t bytes) {
    return ArgumentTypeError(arg_name(index) + " (" + type_name(py::handle(value)) + "): a NumPy scalar of " +
                          std::to_string(bytes) + " bytes; at most 16 are passed by value");
  };
  Py_buffer view;
  if (PyObject_GetBuffer(value, &view, PyBUF_SIMPLE) == 0) {
    const auto bytes = static_cast<std::size_t>(view.len);
    if (bytes <= 2 * sizeof(std::uint64_t)) std::memcpy(slot, view.buf, bytes);
    PyBuffer_Release(&view);
    if (bytes > 2 * sizeof(std::uint64_t)) throw too_large(bytes);
    return bytes;
  }
  PyErr_Clear();  // a scalar without the buffer protocol: its tobytes()
  py::bytes raw = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(value, names().tobytes));
  if (!raw) throw py::error_already_set();
  const std::string bytes = raw;
  if (bytes.size() > 2 * sizeof(std::uint64_t)) throw too_large(bytes.size());
  std::memcpy(slot, bytes.data(), bytes.size());
  return bytes.size();
}

// Any other object: a device array by its __cuda_array_interface__ or DLPack (its export, exported on
// `stream`, goes to `exports`), else refused with the reason.
std::uint64_t other_pointer(PyObject* value, std::size_t index, CUstream stream, std::vector<py::object>& exports) {
  const py::handle object(value);
  py::object cai;
  try {
    cai = optional_attr(value, names().cuda_array_interface);
  } catch (py::error_already_set& e) {  // the library refuses this one (PyTorch: a tensor that requires grad)
    throw ArgumentTypeError(arg_name(index) + " (" + type_name(object) + "): its __cuda_array_interface__ failed: " +
                         e.what());
  }
  if (cai) return interface_pointer(value, cai.ptr(), index);
  if (optional_attr(value, names().dlpack)) {
    DLPackView view = dlpack_view(object, reinterpret_cast<std::intptr_t>(stream), arg_name(index));
    exports.push_back(std::move(view.capsule));
    return view.pointer;
  }
  if (optional_attr(value, names().array_interface) || PyObject_CheckBuffer(value))
    throw ArgumentTypeError(arg_name(index) + " (" + type_name(object) +
                         "): host memory cannot be passed to a kernel; pass a device array (an object with "
                         "__cuda_array_interface__ or __dlpack__: CuPy, PyTorch on CUDA) or a NumPy scalar");
  throw ArgumentTypeError(arg_name(index) + " (" + type_name(object) +
                       "): not a kernel argument; pass a device array (__cuda_array_interface__ or __dlpack__), a NumPy "
                       "scalar, an int (int64 or an address), a float (float64) or None");
}

// The items of a tuple or list as they are, of another sequence as a list.
py::object fast_sequence(const py::handle& sequence, const char* what) {
  PyObject* fast = PySequence_Fast(sequence.ptr(), what);
  if (fast == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fast);
}

}  // namespace

LaunchArgs::LaunchArgs(const py::handle& args, CUstream stream) {
  // bytes, str and their kin are sequences too, of ints or characters: b"abc" would be three int64s.
  if (!PySequence_Check(args.ptr()) || PyBytes_Check(args.ptr()) || PyByteArray_Check(args.ptr()) ||
      PyUnicode_Check(args.ptr()) || PyMemoryView_Check(args.ptr()))
    throw ArgumentTypeError("args (" + type_name(args) + "): pass a sequence (a tuple or list) of the kernel's arguments");
  py::object items = fast_sequence(args, "args: a sequence of kernel arguments");
  count_ = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(items.ptr()));
  if (count_ <= kInline) {
    slots_ = inline_slots_.data();
    sizes_ = inline_sizes_.data();
    pointers_ = inline_pointers_.data();
  } else {
    heap_slots_.resize(count_);
    heap_sizes_.resize(count_);
    heap_pointers_.resize(count_ + 1);
    slots_ = heap_slots_.data();
    sizes_ = heap_sizes_.data();
    pointers_ = heap_pointers_.data();
  }
  PyObject** values = PySequence_Fast_ITEMS(items.ptr());
  for (std::size_t i = 0; i < count_; ++i) {
    PyObject* value = values[i];
    Slot& slot = slots_[i];
    slot = {0, 0};
    sizes_[i] = 8;
    pointers_[i] = slot.data();
    switch (kind_of(Py_TYPE(value))) {
      case Kind::null:  // a null pointer
        break;
      case Kind::integer:
        slot[0] = int_bits(value, i);
        break;
      case Kind::real: {
        const double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
        std::memcpy(slot.data(), &d, sizeof d);
        break;
      }
      case Kind::numpy_scalar:
        sizes_[i] = static_cast<std::uint8_t>(numpy_bytes(value, slot.data(), i));
        break;
      case Kind::cupy_array:
        if (!cupy_pointer(value, slot[0])) slot[0] = other_pointer(value, i, stream, exports_);
        break;
      case Kind::torch_tensor:
        if (!torch_pointer(value, slot[0])) slot[0] = other_pointer(value, i, stream, exports_);
        break;
      case Kind::other:
        slot[0] = other_pointer(value, i, stream, exports_);
        break;
    }
  }
  pointers_[count_] = nullptr;
}

Dim3 to_dim3(const py::handle& value, const char* what) {
  auto one = [&](PyObject* v) -> unsigned {
    if (!PyLong_Check(v)) throw ArgumentTypeError(std::string(what) + ": " + type_name(py::handle(v)) + " is not an int");
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow == 0 && n == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0 || n < 1 || n > std::numeric_limits<unsigned>::max())
      throw ArgumentError(std::string(what) + ": " + std::string(py::str(v)) + " is not a positive 32-bit size");
    return static_cast<unsigned>(n);
  };
  if (PyLong_Check(value.ptr())) return {one(value.ptr()), 1, 1};
  if (!PyTuple_Check(value.ptr()) && !PyList_Check(value.ptr()))
    throw ArgumentTypeError(std::string(what) + ": " + type_name(value) + " is not an int or a tuple of 1 to 3 ints");
  py::object items = fast_sequence(value, what);
  const Py_ssize_t size = PySequence_Fast_GET_SIZE(items.ptr());
  if (size < 1 || size > 3)
    throw ArgumentError(std::string(what) + ": " + std::to_string(size) + " sizes; give 1 to 3");
  Dim3 d;
  unsigned* parts[] = {&d.x, &d.y, &d.z};
  for (Py_ssize_t i = 0; i < size; ++i) *parts[i] = one(PySequence_Fast_GET_ITEM(items.ptr(), i));
  return d;
}

LaunchCall launch_call(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const char* function) {
  static constexpr const char* kNames[] = {"grid", "block", "args", "shared_mem", "stream"};
  constexpr Py_ssize_t kCount = 5, kRequired = 3;
  PyObject* given[kCount] = {};
  if (nargs > kCount)
    throw ArgumentTypeError(std::string(function) + "() takes at most 5 arguments (" + std::to_string(nargs) + " given)");
  for (Py_ssize_t i = 0; i < nargs; ++i) given[i] = args[i];
  const Py_ssize_t named = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < named; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t index = 0;
    while (index < kCount && PyUnicode_CompareWithASCIIString(name, kNames[index]) != 0) ++index;
    if (index == kCount)
      throw ArgumentTypeError(std::string(function) + "() got an unexpected keyword argument '" +
                           std::string(py::str(name)) + "'");
    if (given[index] != nullptr)
      throw ArgumentTypeError(std::string(function) + "() got multiple values for argument '" + kNames[index] + "'");
    given[index] = args[nargs + k];
  }
  for (Py_ssize_t i = 0; i < kRequired; ++i)
    if (given[i] == nullptr)
      throw ArgumentTypeError(std::string(function) + "() missing required argument '" + kNames[i] + "'");
  LaunchCall call;
  call.grid = to_dim3(given[0], "grid");
  call.block = to_dim3(given[1], "block");
  call.args = given[2];
  if (PyObject* shared = given[3]) {
    if (!PyLong_Check(shared))
      throw ArgumentTypeError("shared_mem: " + type_name(py::handle(shared)) + " is not an int");
    int overflow = 0;
    const long long bytes = PyLong_AsLongLongAndOverflow(shared, &overflow);
    if (overflow == 0 && bytes == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0 || bytes < 0 || bytes > std::numeric_limits<unsigned>::max())
      throw ArgumentError("shared_mem: " + std::string(py::str(shared)) + " is not a size in bytes");
    call.shared_mem = static_cast<unsigned>(bytes);
  }
  call.stream = given[4] == nullptr ? nullptr : to_stream(given[4]);
  return call;
}

CUstream to_stream(const py::handle& stream) {
  if (stream.is_none()) return nullptr;
  py::object handle;
  if (PyLong_Check(stream.ptr())) {
    handle = py::reinterpret_borrow<py::object>(stream);
  } else if (py::object protocol = optional_attr(stream.ptr(), names().cuda_stream_protocol)) {
    py::object made = protocol();
    handle = py::isinstance<py::tuple>(made) && py::len(made) == 2 ? made[py::int_(1)] : made;
  } else if (py::object torch_handle = optional_attr(stream.ptr(), names().cuda_stream)) {
    handle = std::move(torch_handle);
  } else if (py::object cupy_handle = optional_attr(stream.ptr(), names().ptr)) {
    handle = std::move(cupy_handle);
  } else {
    throw ArgumentTypeError("stream (" + type_name(stream) +
                         "): pass None, an int (a CUstream), a CuPy stream (.ptr), a PyTorch stream "
                         "(.cuda_stream) or an object with __cuda_stream__");
  }
  if (!PyLong_Check(handle.ptr()))
    throw ArgumentTypeError("stream (" + type_name(stream) + "): its handle is a " + type_name(handle) + ", not an int");
  const unsigned long long address = PyLong_AsUnsignedLongLong(handle.ptr());
  if (address == ULLONG_MAX && PyErr_Occurred()) {
    PyErr_Clear();
    throw ArgumentError("stream (" + type_name(stream) + "): its handle " + std::string(py::str(handle)) +
                          " is not a CUstream's address");
  }
  return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(address));
}

}  // namespace kiln::python
