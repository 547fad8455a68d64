// A device array given through DLPack (__dlpack__ / __dlpack_device__): its pointer, shape, strides and dtype.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::python {

// What a DLPack export says of an array, read from its capsule; the capsule is kept, and with it the
// producer's tensor (its deleter runs when the capsule goes: kiln never takes the tensor over).
struct DLPackView {
  pybind11::object capsule;
  std::uintptr_t pointer = 0;  // data + byte_offset
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in bytes; empty when the export gave none (C-contiguous)
  std::string dtype;                   // NumPy's name (int32, float64, bool, ...), else a description
  std::size_t itemsize = 0;
  int device = 0;  // the CUDA device ordinal
  bool read_only = false;
};

// `object`'s DLPack export for a consumer that works on `stream` (a CUstream's address; 0 the legacy
// default stream, passed on as the protocol's 1; -1 for no synchronisation): the producer makes that
// stream wait for its own work, as the protocol says. The versioned protocol (DLPack 1.x, no copy) is asked
// for first, the earlier one where the producer does not know it. `role` names the argument in errors
// (ArgumentTypeError for what is not a CUDA device array, ArgumentError for a value refused).
DLPackView dlpack_view(const pybind11::handle& object, std::intptr_t stream, const std::string& role);


}  // namespace kiln::python
