"""DLPack tensors made with ctypes: what CuPy, PyTorch or JAX hand out through __dlpack__, with no GPU behind
them, for the tests of kiln's DLPack consumer (tests/python/test_dlpack.py)."""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The names outlive every capsule: the capsule keeps a pointer to its name.
VERSIONED, UNVERSIONED, USED = b"dltensor_versioned", b"dltensor", b"used_dltensor"

CUDA, CPU, CUDA_HOST, CUDA_MANAGED = 2, 1, 3, 13
DTYPES = {"int32": (0, 32), "int64": (0, 64), "uint8": (1, 8), "uint64": (1, 64), "float32": (2, 32),
          "float64": (2, 64), "bool": (6, 8), "bfloat16": (4, 16)}
POINTER = 0x7F0000001000


class Exported:
    """An array that offers DLPack alone (no __cuda_array_interface__), as a DLPack 1.x producer does: each
    __dlpack__ call makes a tensor (kept here, so a capsule never outlives it; it has no destructor) and
    records the stream it was asked for."""

    def __init__(self, shape=(16,), dtype="int32", pointer=POINTER, strides=None, byte_offset=0, device=(CUDA, 0),
                 read_only=False, version=(1, 0), name=VERSIONED, lanes=1):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.dtype, self.pointer, self.strides, self.byte_offset = dtype, pointer, strides, byte_offset
        self.device, self.read_only, self.version, self.name, self.lanes = device, read_only, version, name, lanes
        self.streams = []
        self._made = []

    def __dlpack_device__(self):
        return self.device

    def _tensor(self):
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = (ctypes.c_int64 * max(ndim, 1))(*self.strides) if self.strides is not None else None
        code, bits = DTYPES[self.dtype]
        tensor = DLTensor(data=self.pointer, device=DLDevice(*self.device), ndim=ndim,
                          dtype=DLDataType(code, bits, self.lanes),
                          shape=ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                          strides=ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides else None,
                          byte_offset=self.byte_offset)
        self._made += [shape, strides]
        return tensor

    def _capsule(self, managed, name):
        self._made.append(managed)
        return _capsule_new(ctypes.addressof(managed), name, None)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams.append(stream)
        if max_version is None or self.name == UNVERSIONED:
            return self._capsule(DLManagedTensor(dl_tensor=self._tensor()), UNVERSIONED)
        managed = DLManagedTensorVersioned(version=DLPackVersion(*self.version), flags=1 if self.read_only else 0,
                                           dl_tensor=self._tensor())
        return self._capsule(managed, self.name)


class ExportedBefore1(Exported):
    """A producer of the protocol before DLPack 1.0: __dlpack__ takes a stream alone."""

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._capsule(DLManagedTensor(dl_tensor=self._tensor()), UNVERSIONED)
