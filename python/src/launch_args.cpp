// Python's launch arguments checked and laid out for cuLaunchKernel; each error names the argument.
#include "launch_args.hpp"

#include <cstring>
#include <limits>
#include <string>

namespace py = pybind11;

namespace kiln::python {
namespace {

std::string type_name(const py::handle& value) { return py::str(py::type::handle_of(value).attr("__name__")); }

std::string arg_name(std::size_t index) { return "argument " + std::to_string(index); }

// The data pointer of an object that has __cuda_array_interface__ (CuPy, PyTorch, Numba, ...).
std::uint64_t cuda_array_pointer(const py::handle& value, std::size_t index) {
  py::object cai = value.attr("__cuda_array_interface__");
  if (!py::isinstance<py::dict>(cai) || !cai.contains("data"))
    throw py::value_error(arg_name(index) + " (" + type_name(value) + "): __cuda_array_interface__ has no 'data'");
  py::object data = cai["data"];
  if (!py::isinstance<py::tuple>(data) || py::len(data) < 1 || !py::isinstance<py::int_>(data[py::int_(0)]))
    throw py::value_error(arg_name(index) + " (" + type_name(value) +
                          "): __cuda_array_interface__['data'] is not (pointer, read_only)");
  return data[py::int_(0)].cast<std::uint64_t>();
}

bool is_numpy_scalar(const py::handle& value) {
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("numpy")) return false;  // no NumPy object can exist before NumPy is imported
  return py::isinstance(value, modules["numpy"].attr("generic"));
}

}  // namespace

LaunchArgs::LaunchArgs(const py::sequence& args) {
  slots_.resize(py::len(args));
  sizes_.assign(slots_.size(), 8);
  pointers_.reserve(slots_.size() + 1);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    py::handle value = args[i];
    auto& slot = slots_[i];
    slot = {0, 0};
    if (value.is_none()) {
      // a null pointer
    } else if (py::hasattr(value, "__cuda_array_interface__")) {
      slot[0] = cuda_array_pointer(value, i);
    } else if (is_numpy_scalar(value)) {
      py::bytes raw = value.attr("tobytes")();
      std::string bytes = raw;
      if (bytes.size() > sizeof(slot))
        throw py::type_error(arg_name(i) + " (" + type_name(value) + "): a NumPy scalar of " +
                             std::to_string(bytes.size()) + " bytes; at most 16 are passed by value");
      std::memcpy(slot.data(), bytes.data(), bytes.size());
      sizes_[i] = bytes.size();
    } else if (py::isinstance<py::int_>(value)) {  // bool too, as CuPy does
      auto v = value.cast<py::int_>();
      long long as_signed = 0;
      try {
        as_signed = v.cast<long long>();
      } catch (const py::cast_error&) {
        // An address above INT64_MAX still fits 64 bits as an unsigned value.
        try {
          std::uint64_t u = v.cast<unsigned long long>();
          std::memcpy(slot.data(), &u, sizeof u);
          pointers_.push_back(slot.data());
          continue;
        } catch (const py::cast_error&) {
          throw py::value_error(arg_name(i) + ": " + std::string(py::str(value)) +
                                " does not fit 64 bits (a Python int is passed as int64)");
        }
      }
      std::memcpy(slot.data(), &as_signed, sizeof as_signed);
    } else if (py::isinstance<py::float_>(value)) {
      double d = value.cast<double>();
      std::memcpy(slot.data(), &d, sizeof d);
    } else if (py::hasattr(value, "__array_interface__") || py::isinstance<py::buffer>(value)) {
      throw py::type_error(arg_name(i) + " (" + type_name(value) +
                           "): host memory cannot be passed to a kernel; pass a device array (an object with "
                           "__cuda_array_interface__: CuPy, PyTorch on CUDA) or a NumPy scalar");
    } else {
      throw py::type_error(arg_name(i) + " (" + type_name(value) +
                           "): not a kernel argument; pass a device array (__cuda_array_interface__), a NumPy "
                           "scalar, an int (int64 or an address), a float (float64) or None");
    }
    pointers_.push_back(slot.data());
  }
  pointers_.push_back(nullptr);
}

Dim3 to_dim3(const py::handle& value, const char* what) {
  auto one = [&](const py::handle& v) -> unsigned {
    if (!py::isinstance<py::int_>(v))
      throw py::type_error(std::string(what) + ": " + type_name(v) + " is not an int");
    long long n = v.cast<long long>();
    if (n < 1 || n > std::numeric_limits<unsigned>::max())
      throw py::value_error(std::string(what) + ": " + std::to_string(n) + " is not a positive 32-bit size");
    return static_cast<unsigned>(n);
  };
  if (py::isinstance<py::int_>(value)) return {one(value), 1, 1};
  if (!py::isinstance<py::tuple>(value) && !py::isinstance<py::list>(value))
    throw py::type_error(std::string(what) + ": " + type_name(value) + " is not an int or a tuple of 1 to 3 ints");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
  if (py::len(seq) < 1 || py::len(seq) > 3)
    throw py::value_error(std::string(what) + ": " + std::to_string(py::len(seq)) + " sizes; give 1 to 3");
  Dim3 d;
  unsigned* parts[] = {&d.x, &d.y, &d.z};
  for (std::size_t i = 0; i < py::len(seq); ++i) *parts[i] = one(seq[i]);
  return d;
}

CUstream to_stream(const py::handle& stream) {
  if (stream.is_none()) return nullptr;
  py::object handle;
  if (py::isinstance<py::int_>(stream)) {
    handle = py::reinterpret_borrow<py::object>(stream);
  } else if (py::hasattr(stream, "__cuda_stream__")) {
    py::object protocol = stream.attr("__cuda_stream__")();
    handle = py::isinstance<py::tuple>(protocol) && py::len(protocol) == 2 ? protocol[py::int_(1)] : protocol;
  } else if (py::hasattr(stream, "cuda_stream")) {
    handle = stream.attr("cuda_stream");
  } else if (py::hasattr(stream, "ptr")) {
    handle = stream.attr("ptr");
  } else {
    throw py::type_error("stream (" + type_name(stream) +
                         "): pass None, an int (a CUstream), a CuPy stream (.ptr), a PyTorch stream "
                         "(.cuda_stream) or an object with __cuda_stream__");
  }
  if (!py::isinstance<py::int_>(handle))
    throw py::type_error("stream (" + type_name(stream) + "): its handle is a " + type_name(handle) + ", not an int");
  return reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(handle.cast<unsigned long long>()));
}

}  // namespace kiln::python
