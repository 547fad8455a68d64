// DLPack's consumer side: an array's export asked for on the consumer's stream and read from its capsule.
#include "dlpack.hpp"

#include "bindings.hpp"     // ArgumentError, ArgumentTypeError
#include "launch_args.hpp"  // to_stream

#include <pybind11/stl.h>

#include <cstring>
#include <limits>

namespace py = pybind11;

namespace kiln::python {
namespace {

// DLPack's C ABI (dlpack.h, 1.x), declared here: Debian 12's libdlpack-dev is 0.6, older than the
// versioned tensor (DLManagedTensorVersioned) that producers hand out first. Layouts as the standard fixes them.
struct DLDevice {
  std::int32_t device_type;
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in items; null: C-contiguous
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  std::uint32_t major;
  std::uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  std::uint64_t flags;
  DLTensor dl_tensor;
};
constexpr std::uint64_t kReadOnly = 1;  // DLPACK_FLAG_BITMASK_READ_ONLY
constexpr int kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13;
constexpr int kMaxDimensions = 64;

std::string type_name(const py::handle& value) { return py::str(py::type::handle_of(value).attr("__name__")); }

std::string device_type_name(int type) {
  switch (type) {
    case kCPU: return "the CPU (kDLCPU)";
    case kCUDAHost: return "pinned host memory (kDLCUDAHost)";
    case 4: return "OpenCL";
    case 7: return "Vulkan";
    case 8: return "Metal";
    case 10: return "ROCm";
    case 14: return "oneAPI";
    default: return "DLPack device type " + std::to_string(type);
  }
}

// NumPy's name of a DLPack dtype, or a description of one NumPy has no name for.
std::string dtype_name(DLDataType t) {
  const std::string bits = std::to_string(t.bits);
  if (t.lanes != 1) return "a vector of " + std::to_string(t.lanes) + " lanes (DLPack code " + std::to_string(t.code) + ")";
  switch (t.code) {
    case 0: return "int" + bits;
    case 1: return "uint" + bits;
    case 2: return "float" + bits;
    case 4: return "bfloat" + bits;
    case 5: return "complex" + bits;
    case 6: return t.bits == 8 ? "bool" : "bool" + bits;
    default: return "DLPack type code " + std::to_string(t.code) + " of " + bits + " bits";
  }
}

// The capsule's tensor and whether it is read-only; ArgumentTypeError for what is not a DLPack tensor.
std::pair<const DLTensor*, bool> tensor_of(const py::object& capsule, const std::string& what) {
  if (!PyCapsule_CheckExact(capsule.ptr()))
    throw ArgumentTypeError(what + ": __dlpack__() gave a " + type_name(capsule) + ", not a DLPack capsule");
  const char* name = PyCapsule_GetName(capsule.ptr());
  if (name == nullptr) throw py::error_already_set();
  if (std::strcmp(name, "dltensor_versioned") == 0) {
    auto* managed = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (managed == nullptr) throw py::error_already_set();
    if (managed->version.major != 1)
      throw ArgumentTypeError(what + ": a DLPack " + std::to_string(managed->version.major) + "." +
                              std::to_string(managed->version.minor) + " tensor; kiln reads DLPack 1.x");
    return {&managed->dl_tensor, (managed->flags & kReadOnly) != 0};
  }
  if (std::strcmp(name, "dltensor") == 0) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), name));
    if (managed == nullptr) throw py::error_already_set();
    return {&managed->dl_tensor, false};
  }
  throw ArgumentTypeError(what + ": __dlpack__() gave a capsule named '" + name +
                          "'; a DLPack tensor's is 'dltensor' or 'dltensor_versioned' (and is used once)");
}

}  // namespace

DLPackView dlpack_view(const py::handle& object, std::intptr_t stream, const std::string& role) {
  const std::string what = role + " (" + type_name(object) + ")";
  auto failed = [&](const char* call, py::error_already_set& e) {
    return ArgumentTypeError(what + ": its " + call + " failed: " + e.what());
  };
  // The device first: what a stream means depends on it.
  int device_type = 0, device_id = 0;
  try {
    py::object device = object.attr("__dlpack_device__")();
    if (!py::isinstance<py::tuple>(device) || py::len(device) != 2)
      throw ArgumentTypeError(what + ": __dlpack_device__() gave " + std::string(py::repr(device)) +
                              ", not (device_type, device_id)");
    device_type = device[py::int_(0)].cast<int>();
    device_id = device[py::int_(1)].cast<int>();
  } catch (py::error_already_set& e) {
    throw failed("__dlpack_device__()", e);
  } catch (const py::cast_error&) {
    throw ArgumentTypeError(what + ": __dlpack_device__() gave no ints");
  }
  if (device_type == kCPU || device_type == kCUDAHost)
    throw ArgumentTypeError(what + ": host memory (DLPack says " + device_type_name(device_type) +
                            ") cannot be passed; pass a device array (__cuda_array_interface__, or __dlpack__ on "
                            "a CUDA device)");
  if (device_type != kCUDA && device_type != kCUDAManaged)
    throw ArgumentTypeError(what + ": DLPack says it is in " + device_type_name(device_type) +
                            ", not on a CUDA device; pass a CUDA device array");
  // The protocol's CUDA streams: 1 the legacy default stream (0 is refused as ambiguous), -1 none.
  py::int_ consumer_stream(stream == 0 ? std::intptr_t{1} : stream);
  py::object method = object.attr("__dlpack__");
  py::object capsule;
  try {
    capsule = method(py::arg("stream") = consumer_stream, py::arg("max_version") = py::make_tuple(1, 0),
                     py::arg("copy") = false);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw failed("__dlpack__()", e);
    try {  // a producer of the protocol before max_version and copy
      capsule = method(py::arg("stream") = consumer_stream);
    } catch (py::error_already_set& again) {
      throw failed("__dlpack__()", again);
    }
  }
  const auto [tensor, read_only] = tensor_of(capsule, what);
  const DLTensor& t = *tensor;
  if (t.device.device_type != device_type || t.device.device_id != device_id)
    throw ArgumentError(what + ": its tensor is on device (" + std::to_string(t.device.device_type) + ", " +
                        std::to_string(t.device.device_id) + "), __dlpack_device__() said (" +
                        std::to_string(device_type) + ", " + std::to_string(device_id) + ")");
  if (t.device.device_id < 0) throw ArgumentError(what + ": device " + std::to_string(t.device.device_id));
  if (t.ndim < 0 || t.ndim > kMaxDimensions || (t.ndim > 0 && t.shape == nullptr))
    throw ArgumentError(what + ": a DLPack tensor of " + std::to_string(t.ndim) + " dimensions" +
                        (t.ndim > 0 && t.shape == nullptr ? " and no shape" : ""));
  if (t.dtype.lanes != 1 || t.dtype.bits == 0 || t.dtype.bits % 8 != 0)
    throw ArgumentTypeError(what + ": its dtype is " + dtype_name(t.dtype) + ", not one of whole bytes");
  DLPackView view;
  view.capsule = capsule;
  view.itemsize = t.dtype.bits / 8;
  view.dtype = dtype_name(t.dtype);
  view.device = t.device.device_id;
  view.read_only = read_only;
  const auto data = reinterpret_cast<std::uintptr_t>(t.data);
  if (t.byte_offset > std::numeric_limits<std::uintptr_t>::max() - data)
    throw ArgumentError(what + ": its byte_offset " + std::to_string(t.byte_offset) + " runs past the address space");
  view.pointer = data + t.byte_offset;
  view.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max() / 32;  // times an itemsize (at most 31 bytes), it fits
    for (std::int32_t i = 0; i < t.ndim; ++i) {
      if (t.strides[i] > kMax || t.strides[i] < -kMax)
        throw ArgumentError(what + ": a stride of " + std::to_string(t.strides[i]) + " items");
      view.strides.push_back(t.strides[i] * static_cast<std::int64_t>(view.itemsize));
    }
  }
  return view;
}

void bind_dlpack(py::module_& m) {
  m.def(
      "_dlpack",
      [](const py::handle& object, const py::handle& stream, const std::string& role) {
        const std::intptr_t handle = stream.is_none() ? -1 : reinterpret_cast<std::intptr_t>(to_stream(stream));
        DLPackView v = dlpack_view(object, handle, role);
        py::object strides = v.strides.empty() ? py::object(py::none()) : py::object(py::tuple(py::cast(v.strides)));
        return py::make_tuple(v.capsule, v.pointer, py::tuple(py::cast(v.shape)), strides, v.dtype, v.itemsize,
                              v.device, v.read_only);
      },
      py::arg("object"), py::arg("stream"), py::arg("role"),
      "(capsule, pointer, shape, strides in bytes or None, dtype, itemsize, device, read_only) of `object`'s DLPack "
      "export for work on `stream` (None: no synchronisation), for kiln/primitives.py.");
}

}  // namespace kiln::python
