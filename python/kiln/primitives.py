"""kiln's primitives (libkiln_prim: CUB's scan, reduce, sorts, select, unique-by-key and searches) on device arrays.

Any object with __cuda_array_interface__ (CuPy, PyTorch on CUDA, Numba) or DLPack's __dlpack__ and
__dlpack_device__ (JAX, and any array of the Python array API on a CUDA device) is an array here: contiguous,
its items counted flat, its dtype checked against the types the package's libkiln_prim instantiates. A DLPack
export is asked for on the call's stream, so that its producer orders its own work before the call, as the
protocol says. Each primitive comes two ways, as cuda.compute's do:

    plan = kiln.make_exclusive_sum(d_in, d_out)           # kernels resolved now, on d_in's device
    temp = cupy.empty(plan.temp_bytes(n), cupy.uint8)      # or plan(None, d_in, d_out, n): the size
    plan(temp, d_in, d_out, n, stream=s)                   # reusable, any stream, never allocates
    d_out = kiln.exclusive_sum(d_in, stream=s)             # one-shot: outputs made by d_in's library

Calls are stream-ordered and return before the GPU is done. Outputs not given are made by the library of
the first input array (type(x).__module__): cupy.empty on the array's device, or torch.empty on its
device; for any other library, pass them. A one-shot call's temporary storage comes from that library's
pool too when the call's stream is the library's current one, else it is allocated and freed in stream
order on the call's stream (cuMemAllocAsync), as C++'s one-shot functions do. Nothing here touches the
driver before the first primitive of a kind is made on a device. docs/python.md is the guide.
"""

import operator
import sys

from . import _kiln, structs
from ._kiln import ArgumentError, ArgumentTypeError  # kiln.Error (code invalid_argument) and ValueError/TypeError

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "Primitive",
    "exclusive_sum",
    "lower_bound",
    "make_exclusive_sum",
    "make_lower_bound",
    "make_merge_sort_pairs",
    "make_radix_sort_pairs",
    "make_reduce_sum",
    "make_segmented_reduce",
    "make_segmented_sort",
    "make_select_indices",
    "make_unique_by_key",
    "make_upper_bound",
    "merge_sort_pairs",
    "primitive_types",
    "radix_sort_pairs",
    "reduce_sum",
    "segmented_reduce",
    "segmented_sort",
    "select_indices",
    "unique_by_key",
    "upper_bound",
]


_types = None


def primitive_types():
    """{primitive: [dtype names]}: the types this package's libkiln_prim instantiates ({} when built without it)."""
    global _types
    if _types is None:
        _types = {name: tuple(types) for name, types in _kiln._primitive_types().items()}
    return _types


_KINDS = {"i": "int", "u": "uint", "f": "float", "c": "complex"}


def _dtype_name(typestr):
    """NumPy's name for an array interface's typestr ('<i4' -> 'int32')."""
    if typestr in ("|b1", "<b1", ">b1"):
        return "bool"
    kind = _KINDS.get(typestr[1:2])
    if kind is None or not typestr[2:].isdigit():
        return typestr
    if typestr[0] == ">" and typestr[2:] != "1":
        return "big-endian " + kind + str(8 * int(typestr[2:]))
    return kind + str(8 * int(typestr[2:]))


def _device_of(obj):
    """The CUDA device an array lives on: CuPy's .device.id, PyTorch's .device.index; None when not known."""
    device = getattr(obj, "device", None)
    for attribute in ("id", "index"):
        ordinal = getattr(device, attribute, None)
        if isinstance(ordinal, int):
            return ordinal
    return None


def _stream_handle(stream):
    """A call's stream as the CUstream's address (0: the legacy default stream)."""
    if stream is None:
        return 0
    if type(stream) is int and stream >= 0:
        return stream
    return _kiln._stream_handle(stream)


_TYPESTRS = {}  # typestr -> (dtype name, item bytes)
# An array's bytes and its end must fit the 64-bit address space (C++ takes sizes as size_t, pointers as
# uintptr_t): bounds checked here, so that no made-up shape or pointer reaches the driver.
_MAX_BYTES = (1 << 63) - 1
_ADDRESS_END = 1 << 64


def _typestr(typestr):
    known = _TYPESTRS.get(typestr)
    if known is None:
        known = _TYPESTRS[typestr] = (_dtype_name(typestr), int(typestr[2:]) if typestr[2:].isdigit() else 0)
    return known


def _ints(values):
    """`values` (a tuple or list) as a tuple of ints (each an int or has __index__, as NumPy's integers do;
    never a bool), or None."""
    if type(values) not in (tuple, list):
        return None
    out = []
    for v in values:
        if type(v) is not int:
            if isinstance(v, bool) or not hasattr(type(v), "__index__"):
                return None
            v = operator.index(v)
        out.append(v)
    return tuple(out)


# A DLPack export asked for by a plan's maker, which reads no data: no stream is made to wait.
_NO_STREAM = None


class _Array:
    """One argument's array: its pointer, item count, dtype name, device and library; `stream` is the handle of
    the call's stream (what a DLPack producer orders its work before), or _NO_STREAM."""

    __slots__ = ("obj", "pointer", "size", "nbytes", "dtype", "device", "read_only", "library", "export")

    def __init__(self, obj, role, primitive, stream=_NO_STREAM):
        self.obj = obj
        self.read_only = False
        self.export = None
        self.library = _readers.get(type(obj)) or _reader_of(type(obj))
        if self.library.read(self, obj):
            return
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            if hasattr(obj, "__dlpack__"):
                self._dlpack(obj, role, primitive, stream)
                return
            raise ArgumentTypeError(
                f"kiln.{primitive}: {role} ({type(obj).__name__}) is not a device array; pass an object with "
                "__cuda_array_interface__ or __dlpack__ (a CuPy array, a PyTorch CUDA tensor, a JAX or Numba "
                "device array)") from None
        # What another library's object says of itself is checked before any of it reaches C++ or the driver.
        def refused(kind, what):
            return kind(f"kiln.{primitive}: {role} ({type(obj).__name__}): its __cuda_array_interface__ {what}")
        if not isinstance(cai, dict):
            raise refused(ArgumentTypeError, f"is a {type(cai).__name__}, not a dict")
        for key in ("shape", "typestr", "data"):
            if key not in cai:
                raise refused(ArgumentTypeError, f"has no '{key}'")
        typestr, data = cai["typestr"], cai["data"]
        if type(typestr) is not str:
            raise refused(ArgumentTypeError, f"has a typestr {typestr!r}, not a str")
        self.dtype, itemsize = _typestr(typestr)
        if typestr[1:2] == "V" and cai.get("descr") is not None:  # a record array (Numba's): its fields
            structured = structs.dtype_of_interface(typestr, cai["descr"], f"kiln.{primitive}: {role}")
            if structured is not None:
                self.dtype = _NUMPY_NAMES.get(structured) or _numpy_name(structured)
        pointer = _ints(data[:1]) if type(data) in (tuple, list) and data else None
        if pointer is None:
            raise refused(ArgumentTypeError, f"has data {data!r}, not (pointer, read_only)")
        self.read_only = len(data) > 1 and data[1] is True
        if cai.get("mask") is not None:
            raise ArgumentError(f"kiln.{primitive}: {role} is a masked array")
        self._layout(cai["shape"], cai.get("strides"), itemsize, pointer[0], refused)
        self.device = _device_of(obj)

    def _dlpack(self, obj, role, primitive, stream):
        def refused(kind, what):
            return kind(f"kiln.{primitive}: {role} ({type(obj).__name__}): its DLPack tensor {what}")
        try:
            (self.export, pointer, shape, strides, self.dtype, itemsize, self.device,
             self.read_only) = _kiln._dlpack(obj, stream, role)
        except ArgumentError as e:  # kiln's own (a ValueError)
            raise ArgumentError(f"kiln.{primitive}: {e}") from None
        except ArgumentTypeError as e:
            raise ArgumentTypeError(f"kiln.{primitive}: {e}") from None
        self._layout(shape, strides, itemsize, pointer, refused)

    def _layout(self, shape, strides, itemsize, pointer, refused):
        """Size, bytes and pointer from a shape and strides (in bytes, None: C-contiguous), checked."""
        given, shape = shape, _ints(shape)
        if shape is None:
            raise refused(ArgumentTypeError, f"has a shape {given!r}, not a tuple of ints")
        size = 1
        for extent in shape:
            if extent < 0:
                raise refused(ArgumentError, f"has a shape {tuple(shape)!r}: an extent below 0")
            size *= extent
        if size > _MAX_BYTES or size * itemsize > _MAX_BYTES:
            raise refused(ArgumentError, f"has a shape {tuple(shape)!r}: {size} items of {itemsize} bytes, more than "
                                         "a device array can hold")
        if pointer < 0 or pointer + size * itemsize > _ADDRESS_END:
            raise refused(ArgumentError, f"has a pointer {pointer:#x}, not a 64-bit device address (of "
                                         f"{size * itemsize} bytes)")
        if strides is not None:
            given, strides = strides, _ints(strides)
            if strides is None or len(strides) != len(shape):
                raise refused(ArgumentTypeError, f"has strides {given!r}, not a tuple of an int per extent")
        if strides is not None and size > 1:
            expected, item = [], itemsize
            for extent in reversed(shape):
                expected.append(item)
                item *= extent
            if tuple(s for s, e in zip(strides, shape) if e > 1) != tuple(
                    s for s, e in zip(reversed(expected), shape) if e > 1):
                raise refused(ArgumentError, f"is not contiguous (strides {tuple(strides)} bytes); pass a "
                                             "C-contiguous array (cupy.ascontiguousarray, tensor.contiguous())")
        self.pointer = pointer
        self.size = size
        self.nbytes = size * itemsize


class _Other:
    """The arrays of a library kiln knows nothing more of: read through their interfaces; outputs must be given."""

    name = None

    def read(self, array, obj):
        """Fills `array` from `obj` by the library's own attributes and says so; False: read the interfaces."""
        return False

    def empty(self, like, shape, dtype):
        """An array of the library on the device of `like` (an _Array), from its pool; None: it cannot."""
        return None

    def temp(self, like, nbytes, stream):
        """(what holds it, its address): nbytes of temporary storage from the library's pool, when that pool
        orders it on `stream` (a handle); else None. A pool reuses a block freed on the stream it was allocated
        on without waiting: on the call's stream that is ordered after the call, on another it would not be."""
        return None


class _CuPy(_Other):
    """CuPy's arrays, read by their attributes (its __cuda_array_interface__ is a dict built on each read);
    outputs and temporary storage from its allocator on its current device and stream."""

    name = "cupy"

    def __init__(self, cupy):
        self.cupy = cupy
        self.current_device = cupy.cuda.runtime.getDevice
        self.current_stream = cupy.cuda.get_current_stream
        self.alloc = cupy.cuda.memory.alloc
        self.make = cupy.empty

    def read(self, array, obj):
        try:
            contiguous = obj._c_contiguous
        except AttributeError:  # a CuPy that keeps it elsewhere
            contiguous = obj.flags.c_contiguous
        if not contiguous and obj.size > 1:
            return False  # the interface's strides name it in the error
        memory = obj.data
        array.pointer = memory.ptr
        array.device = memory.device_id
        array.size = obj.size
        array.nbytes = obj.nbytes
        array.dtype = _NUMPY_NAMES.get(obj.dtype) or _numpy_name(obj.dtype)
        return True

    def empty(self, like, shape, dtype):
        if self.current_device() == like.device:
            return self.make(shape, dtype=dtype)
        with self.cupy.cuda.Device(like.device):
            return self.make(shape, dtype=dtype)

    def temp(self, like, nbytes, stream):
        if self.current_device() == like.device:
            return self._temp(nbytes, stream)
        with self.cupy.cuda.Device(like.device):
            return self._temp(nbytes, stream)

    def _temp(self, nbytes, stream):
        if self.current_stream().ptr != stream:
            return None
        memory = self.alloc(nbytes)
        return memory, memory.ptr


class _Torch(_Other):
    """PyTorch's CUDA tensors, read by their attributes (its __cuda_array_interface__ is built in Python on each
    read); outputs and temporary storage from its caching allocator on the tensor's device."""

    name = "torch"

    def __init__(self, torch):
        self.torch = torch

    def read(self, array, obj):
        if not obj.is_cuda or obj.requires_grad or not obj.is_contiguous():
            return False  # the interface says why it is refused
        array.pointer = obj.data_ptr()
        array.device = obj.get_device()
        array.size = obj.numel()
        array.nbytes = array.size * obj.element_size()
        array.dtype = _TORCH_NAMES.get(obj.dtype) or _torch_name(obj.dtype)
        return True

    def empty(self, like, shape, dtype):
        return self.torch.empty(shape, dtype=getattr(self.torch, dtype), device=like.obj.device)

    def temp(self, like, nbytes, stream):
        if self.torch.cuda.current_stream(like.obj.device).cuda_stream != stream:
            return None
        temp = self.torch.empty((nbytes,), dtype=self.torch.uint8, device=like.obj.device)
        return temp, temp.data_ptr()


_OTHER = _Other()
_libraries = {}  # module name -> its _Other
_readers = {}  # type -> its library's _Other; kept small: the array types a process passes
_NUMPY_NAMES = {}  # NumPy dtype -> its name
_TORCH_NAMES = {}  # torch.dtype -> NumPy's name of it
_STRUCTURED = {}  # the name of a structured dtype (its str, which spells its whole layout) -> the dtype


def _numpy_name(dtype):
    name = dtype.name
    if dtype.names is not None:  # "void64" would name every struct of 8 bytes
        name = str(dtype)
        _STRUCTURED[name] = dtype
    _NUMPY_NAMES[dtype] = name
    return name


def _torch_name(dtype):
    name = _TORCH_NAMES[dtype] = str(dtype).rpartition(".")[2]
    return name


def _reader_of(cls):
    """The library an array type comes from (by its module: CuPy's ndarray, PyTorch's Tensor), else _OTHER."""
    module = cls.__module__.partition(".")[0]
    library = _OTHER
    if module in ("cupy", "torch"):
        imported = sys.modules.get(module)
        base = getattr(imported, "ndarray" if module == "cupy" else "Tensor", None)
        if isinstance(base, type) and issubclass(cls, base):
            library = _libraries.get(module) or _libraries.setdefault(
                module, _CuPy(imported) if module == "cupy" else _Torch(imported))
    if len(_readers) < 64:
        _readers[cls] = library
    return library


def _supported(primitive, types):
    return f"kiln.{primitive} takes {', '.join(types)}" if types else (
        f"this kiln package has no kiln.{primitive}: it was built without the primitives (-Dprimitives=true)")


# What each primitive takes, in its C++ plan's order: (role, dtype, least item count). dtype "T" is the
# primitive's type (every "T" array has it); a tuple lists the dtypes accepted. The least count names a size
# of the call: "n" (items), "m" (segments, needles), "m+1" (segment offsets), 1, or None (not checked).
_ROLES = {
    "exclusive_sum": (("d_in", "T", "n"), ("d_out", "T", "n")),
    "reduce_sum": (("d_in", "T", "n"), ("d_out", "T", 1)),
    "segmented_reduce": (("d_in", "T", None), ("d_out", "T", "m"), ("offsets", ("int32",), "m+1")),
    "merge_sort_pairs": (("keys", "T", "n"), ("values", ("int32",), "n")),
    "unique_by_key": (("keys_in", "T", "n"), ("values_in", ("int32",), "n"), ("keys_out", "T", "n"),
                      ("values_out", ("int32",), "n"), ("num_selected", ("uint64",), 1)),
    "radix_sort_pairs": (("keys_in", "T", "n"), ("keys_out", "T", "n"), ("values_in", ("int32",), "n"),
                         ("values_out", ("int32",), "n")),
    "select_indices": (("mask", ("uint8", "bool", "int8"), "n"), ("out", "T", "n"), ("count", "T", 1)),
    "lower_bound": (("haystack", "T", "n"), ("needles", "T", "m"), ("out", ("int64",), "m")),
    "upper_bound": (("haystack", "T", "n"), ("needles", "T", "m"), ("out", ("int64",), "m")),
    "segmented_sort": (("keys_in", "T", "n"), ("keys_out", "T", "n"), ("offsets", ("int32",), "m+1")),
}
# The sizes a plan's call takes after its arrays, in order.
_SIZES = {"exclusive_sum": ("n",), "reduce_sum": ("n",), "segmented_reduce": ("m",), "merge_sort_pairs": ("n",),
          "unique_by_key": ("n",), "radix_sort_pairs": ("n",), "select_indices": ("n",),
          "lower_bound": ("n", "m"), "upper_bound": ("n", "m"), "segmented_sort": ("n", "m")}
# The position of the array whose dtype is the primitive's type ("T"): the first "T", but select's out.
_TYPED_INDEX = {primitive: 1 if primitive == "select_indices" else [dtype for _, dtype, _ in roles].index("T")
                for primitive, roles in _ROLES.items()}
_SEGMENTED_OPS = ("sum", "min", "max")
# The roles a call writes.
_WRITTEN = frozenset(("d_out", "keys", "values", "keys_out", "values_out", "num_selected", "out", "count"))

_made = {}  # (kind, dtype, device) -> _kiln._Primitive: the process keeps one of each, as libkiln_prim does


def _primitive_of(kind, dtype, device):
    key = (kind, dtype, device)
    made = _made.get(key)
    if made is None:
        made = _made[key] = _kiln._primitive(kind, dtype, device)
    return made


# A role's least item count (_ROLES) as coefficients of the call's sizes: cn * n + cm * m + c.
_LEAST = {"n": (1, 0, 0), "m": (0, 1, 0), "m+1": (0, 1, 1), 1: (0, 0, 1), None: (0, 0, 0)}
# Each primitive's roles as a call checks them: (role, dtype, least count's coefficients, written).
_CHECKS = {primitive: tuple((role, want, _LEAST[least], role in _WRITTEN) for role, want, least in roles)
           for primitive, roles in _ROLES.items()}


def _checked(primitive, kind, objs, sizes=None, stream=_NO_STREAM):
    """The arrays of a call checked against the primitive's roles; its dtype; its device (an array's, else the
    current one); the sizes given (n, m) with the least counts checked."""
    return _checked_arrays(primitive, _CHECKS[primitive], _TYPED_INDEX[primitive],
                           (_types or primitive_types()).get(kind, ()), None, objs, sizes, stream)


def _checked_arrays(primitive, checks, typed, types, supported, objs, sizes, stream):
    """_checked for any roles (`checks` as _CHECKS's): the dtype of the array at `typed` must be one of `types`
    (else the error says `supported`, or _supported's sentence when None); `stream` a handle (_stream_handle)."""
    arrays = [obj if obj.__class__ is _Array else _Array(obj, check[0], primitive, stream)
              for obj, check in zip(objs, checks)]
    dtype = arrays[typed].dtype
    if dtype not in types:
        raise ArgumentTypeError(f"kiln.{primitive}: {checks[typed][0]} is {dtype}; "
                                + (supported or _supported(primitive, types)))
    n, m = sizes if sizes is not None else (0, 0)
    device = None
    for a, (role, want, (cn, cm, c), written) in zip(arrays, checks):
        if a.dtype != dtype if want == "T" else a.dtype not in want:
            if want == "T":
                raise ArgumentTypeError(f"kiln.{primitive}: {role} is {a.dtype}, {checks[typed][0]} {dtype}; "
                                        "they must match")
            raise ArgumentTypeError(f"kiln.{primitive}: {role} is {a.dtype}; it must be {' or '.join(want)}")
        if a.device is not None:
            if device is not None and a.device != device:
                raise ArgumentError(f"kiln.{primitive}: {role} is on device {a.device}, the other arrays on {device}")
            device = a.device
        if sizes is not None and a.size < cn * n + cm * m + c:
            raise ArgumentError(f"kiln.{primitive}: {role} has {a.size} items; the call needs {cn * n + cm * m + c}")
        if written and a.read_only:
            raise ArgumentError(f"kiln.{primitive}: {role} is read-only; the call writes it")
    return arrays, dtype, (_kiln._current_device() if device is None else device)


def _count(value, what, primitive):
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentTypeError(f"kiln.{primitive}: {what} must be an int >= 0, not {value!r}")
    if value < 0 or value > _MAX_BYTES:
        raise ArgumentError(f"kiln.{primitive}: {what} must be an int >= 0 that fits 63 bits, not {value!r}")
    return value


def _temp_storage(temp, primitive, stream):
    """A plan call's temporary storage described (an _Array); read-only storage is refused: the call writes it."""
    storage = _Array(temp, "temp", primitive, stream)
    if storage.read_only:
        raise ArgumentError(f"kiln.{primitive}: temp is read-only; the call writes it")
    return storage


class Primitive:
    """A plan of one of kiln's primitives for one dtype on one device (kiln.make_*): its kernels are resolved
    when it is made. Call it with temporary storage (a device array of at least temp_bytes(...) bytes), the
    arrays and the sizes: plan(temp, *arrays, *sizes, stream=None). With temp None it returns the bytes
    needed and runs nothing. Calls never allocate and may overlap on any streams."""

    __slots__ = ("_primitive", "_kind", "_native", "dtype", "device")

    def __init__(self, primitive, kind, objs):
        arrays, self.dtype, self.device = _checked(primitive, kind, objs)
        self._primitive, self._kind = primitive, kind
        self._native = _primitive_of(kind, self.dtype, self.device)

    @property
    def source(self):
        """The tier its kernels' binary came from: embedded, disk, remote, ptx or jit."""
        return self._native.source

    def temp_bytes(self, *sizes):
        """The temporary storage a call of these sizes needs, in bytes."""
        n, m = self._sizes(sizes)
        return self._native.temp_bytes(n, m)

    def _sizes(self, sizes):
        names = _SIZES[self._primitive]
        if len(sizes) != len(names):
            raise ArgumentTypeError(f"kiln.{self._primitive}: {len(names)} sizes ({', '.join(names)}) are expected, "
                                    f"not {len(sizes)}")
        values = dict(zip(names, (_count(s, name, self._primitive) for s, name in zip(sizes, names))))
        return values.get("n", 0), values.get("m", 0)

    def __call__(self, temp, *args, stream=None):
        roles = _ROLES[self._primitive]
        objs, sizes = args[:len(roles)], args[len(roles):]
        if len(objs) != len(roles):
            raise ArgumentTypeError(f"kiln.{self._primitive}: the arrays {', '.join(r for r, _, _ in roles)} are "
                                    "expected")
        n, m = self._sizes(sizes)
        handle = _stream_handle(stream)
        arrays, dtype, device = _checked(self._primitive, self._kind, objs, (n, m), handle)
        if dtype != self.dtype or device != self.device:
            raise ArgumentError(f"kiln.{self._primitive}: this plan is for {self.dtype} on device {self.device}, "
                                f"not {dtype} on device {device}")
        if temp is None:
            return self._native.temp_bytes(n, m)
        storage = _temp_storage(temp, self._primitive, handle)
        self._native.run([a.pointer for a in arrays], n, m, storage.pointer, storage.nbytes, handle)
        return None

    def __repr__(self):
        return f"<kiln.{self._primitive} plan {self.dtype} on device {self.device}>"


# A one-shot call takes its temporary storage from the pool of its first array's library (CuPy's or
# PyTorch's, warm by the time arrays exist) when that pool orders it on the call's stream; else from the
# driver's stream-ordered pool (cuMemAllocAsync), with which a family's first call in a fresh process took
# 8-13 ms where one needing no storage took under 1 ms. False sends every call to the driver's pool:
# bench/python_prims.py (--parts temp) measures the difference.
_library_temp = True


def _once(primitive, kind, objs, sizes, stream):
    """A one-shot call: `objs` (arrays or _Arrays) checked, `stream` a handle (_stream_handle)."""
    arrays, dtype, device = _checked(primitive, kind, objs, sizes, stream)
    native = _made.get((kind, dtype, device)) or _primitive_of(kind, dtype, device)
    _run_once(native, arrays, sizes, stream)


def _run_once(native, arrays, sizes, stream):
    """A one-shot call of `native` (a _kiln._Primitive, or what has its temp_bytes, run and run_once) on
    checked arrays, `stream` a handle, its temporary storage as _library_temp says."""
    pointers = [a.pointer for a in arrays]
    n, m = sizes
    if _library_temp:
        nbytes = native.temp_bytes(n, m)
        if nbytes == 0:
            native.run(pointers, n, m, 0, 0, stream)
            return
        first = arrays[0]
        temp = first.library.temp(first, nbytes, stream)
        if temp is not None:
            # temp goes back to its pool when this returns: the pool reuses it in its stream's order, after
            # the work enqueued here.
            native.run(pointers, n, m, temp[1], nbytes, stream)
            return
    native.run_once(pointers, n, m, stream)


def _allocate(like, shape, dtype, primitive, role):
    """An output of the library `like` (an _Array) comes from, on its device, described (an _Array)."""
    made = like.library.empty(like, shape, _STRUCTURED.get(dtype, dtype))
    if made is None:
        obj = like.obj
        raise ArgumentTypeError(f"kiln.{primitive}: {role} was not given, and kiln makes outputs only for CuPy "
                                f"arrays and PyTorch tensors, not {type(obj).__module__}.{type(obj).__name__}: "
                                "pass it")
    return made, _Array(made, role, primitive)


# ---- plans -------------------------------------------------------------------------------------------------


def make_exclusive_sum(d_in, d_out):
    """A plan of out[i] = in[0] + ... + in[i-1] (int32, int64): plan(temp, d_in, d_out, n, stream=None)."""
    return Primitive("exclusive_sum", "exclusive_sum", (d_in, d_out))


def make_reduce_sum(d_in, d_out):
    """A plan of out[0] = the sum of in[0, n) (int32, float64; CUB's order): plan(temp, d_in, d_out, n, stream=None)."""
    return Primitive("reduce_sum", "reduce_sum", (d_in, d_out))


def _fixed(op):
    """Whether a segmented reduce's op is one of kiln's ("sum", "min", "max") rather than an operator of the
    caller's (CUDA C++ text or a kiln.Operator: kiln/operators.py). A bare name that is not kiln's is neither."""
    if isinstance(op, str) and op.isidentifier():
        if op not in _SEGMENTED_OPS:
            raise ArgumentError(f"kiln.segmented_reduce: op {op!r} is not one of {', '.join(_SEGMENTED_OPS)}, nor an "
                                "operator (CUDA C++ text such as \"a > b ? a : b\", or a kiln.Operator)")
        return True
    return False


def make_segmented_reduce(d_in, d_out, offsets, op="sum"):
    """A plan of out[i] = op over in[offsets[i], offsets[i+1]) (op "sum": int32, float64; "min", "max": float64;
    int32 offsets): plan(temp, d_in, d_out, offsets, num_segments, stream=None). With an operator of the
    caller's (CUDA C++ text or a kiln.Operator, T(T, T): "a + b"), any of kiln.operators' dtypes:
    plan(temp, d_in, d_out, offsets, num_segments, init, stream=None)."""
    if not _fixed(op):
        from . import operators

        return operators._make_segmented_reduce(d_in, d_out, offsets, op)
    return Primitive("segmented_reduce", "segmented_" + op, (d_in, d_out, offsets))


def make_merge_sort_pairs(keys, values, op=None):
    """A plan of a stable in-place sort of uint64 keys with int32 values: plan(temp, keys, values, n, stream=None).
    With op, a comparison of the caller's (bool(K, K): "a > b" sorts descending), keys of any of
    kiln.operators' dtypes."""
    if op is not None:
        from . import operators

        return operators._make_merge_sort_pairs(keys, values, op)
    return Primitive("merge_sort_pairs", "merge_sort_pairs", (keys, values))


def make_unique_by_key(keys_in, values_in, keys_out, values_out, num_selected, op=None):
    """A plan keeping the first pair of each run of equal keys (int32, uint64 keys; int32 values; uint64
    num_selected): plan(temp, keys_in, values_in, keys_out, values_out, num_selected, n, stream=None). With op,
    an equality of the caller's (bool(K, K)), keys of any of kiln.operators' dtypes."""
    if op is not None:
        from . import operators

        return operators._make_unique_by_key(keys_in, values_in, keys_out, values_out, num_selected, op)
    return Primitive("unique_by_key", "unique_by_key", (keys_in, values_in, keys_out, values_out, num_selected))


def make_radix_sort_pairs(keys_in, keys_out, values_in, values_out):
    """A plan of a stable ascending radix sort, out of place (int32, int64, uint64, float64 keys; int32 values):
    plan(temp, keys_in, keys_out, values_in, values_out, n, stream=None)."""
    return Primitive("radix_sort_pairs", "radix_sort_pairs", (keys_in, keys_out, values_in, values_out))


def make_select_indices(mask, out, count):
    """A plan writing the indices of mask's nonzero bytes (uint8 or bool) to out and their number to count
    (int32 or int64): plan(temp, mask, out, count, n, stream=None)."""
    return Primitive("select_indices", "select_indices", (mask, out, count))


def make_lower_bound(haystack, needles, out):
    """A plan of searchsorted(side='left') into a sorted haystack (int32, int64, uint64, float64; int64 out):
    plan(temp, haystack, needles, out, haystack_size, num_needles, stream=None); temp_bytes is 0, temp may be None
    only to ask it."""
    return Primitive("lower_bound", "lower_bound", (haystack, needles, out))


def make_upper_bound(haystack, needles, out):
    """A plan of searchsorted(side='right'), as make_lower_bound."""
    return Primitive("upper_bound", "upper_bound", (haystack, needles, out))


def make_segmented_sort(keys_in, keys_out, offsets):
    """A plan sorting keys within segments (int32, float64; int32 offsets):
    plan(temp, keys_in, keys_out, offsets, n, num_segments, stream=None)."""
    return Primitive("segmented_sort", "segmented_sort", (keys_in, keys_out, offsets))


# ---- one-shot calls ----------------------------------------------------------------------------------------


def exclusive_sum(d_in, d_out=None, stream=None):
    """out[i] = in[0] + ... + in[i-1], out[0] = 0 (int32, int64); d_out may be d_in. Returns d_out."""
    handle = _stream_handle(stream)
    a = _Array(d_in, "d_in", "exclusive_sum", handle)
    if d_out is None:
        d_out, out = _allocate(a, (a.size,), a.dtype, "exclusive_sum", "d_out")
    else:
        out = d_out
    _once("exclusive_sum", "exclusive_sum", (a, out), (a.size, 0), handle)
    return d_out


def reduce_sum(d_in, d_out=None, stream=None):
    """The sum of d_in (int32, float64), in CUB's order, written to d_out's first item (made 0-d when not
    given, as cupy.sum's). Returns d_out."""
    handle = _stream_handle(stream)
    a = _Array(d_in, "d_in", "reduce_sum", handle)
    if d_out is None:
        d_out, out = _allocate(a, (), a.dtype, "reduce_sum", "d_out")
    else:
        out = d_out
    _once("reduce_sum", "reduce_sum", (a, out), (a.size, 0), handle)
    return d_out


def segmented_reduce(d_in, offsets, op="sum", d_out=None, stream=None, init=None):
    """out[i] = op over d_in[offsets[i], offsets[i+1]) for each of the len(offsets) - 1 segments (op "sum":
    int32, float64; "min", "max": float64; CUB's start values for empty segments). Returns d_out. op may be
    an operator of the caller's (CUDA C++ text or a kiln.Operator, T(T, T): "a > b ? a : b"); then init is
    needed (op(init, ...) of each segment, an empty one's value)."""
    fixed = _fixed(op)
    handle = _stream_handle(stream)
    a = _Array(d_in, "d_in", "segmented_reduce", handle)
    o = _Array(offsets, "offsets", "segmented_reduce", handle)
    if not fixed:
        from . import operators

        return operators._segmented_reduce(a, o, op, init, d_out, handle)
    if init is not None:
        raise ArgumentError(f"kiln.segmented_reduce: op {op!r} takes no init (its start value is CUB's)")
    kind = "segmented_" + op
    segments = max(o.size - 1, 0)
    if d_out is None:
        d_out, out = _allocate(a, (segments,), a.dtype, "segmented_reduce", "d_out")
    else:
        out = d_out
    _once("segmented_reduce", kind, (a, out, o), (0, segments), handle)
    return d_out


def merge_sort_pairs(keys, values, stream=None, op=None):
    """Sorts uint64 keys ascending in place, stable, moving int32 values with them. Returns (keys, values).
    With op, a comparison of the caller's (bool(K, K): "a > b" sorts descending), keys of any of
    kiln.operators' dtypes."""
    handle = _stream_handle(stream)
    k = _Array(keys, "keys", "merge_sort_pairs", handle)
    if op is not None:
        from . import operators

        operators._merge_sort_pairs(k, values, op, handle)
        return keys, values
    _once("merge_sort_pairs", "merge_sort_pairs", (k, values), (k.size, 0), handle)
    return keys, values


def radix_sort_pairs(keys, values, keys_out=None, values_out=None, stream=None):
    """Sorts (int32, int64, uint64, float64) keys ascending, stable, out of place, moving int32 values with them.
    Returns (keys_out, values_out)."""
    handle = _stream_handle(stream)
    k = _Array(keys, "keys_in", "radix_sort_pairs", handle)
    ko, vo = keys_out, values_out
    if keys_out is None:
        keys_out, ko = _allocate(k, (k.size,), k.dtype, "radix_sort_pairs", "keys_out")
    if values_out is None:
        values_out, vo = _allocate(k, (k.size,), "int32", "radix_sort_pairs", "values_out")
    _once("radix_sort_pairs", "radix_sort_pairs", (k, ko, values, vo), (k.size, 0), handle)
    return keys_out, values_out


def unique_by_key(keys, values, keys_out=None, values_out=None, num_selected=None, stream=None, op=None):
    """Of each run of equal (int32, uint64) keys, the first key and its int32 value, compacted to the front of
    keys_out and values_out; the number of runs goes to num_selected (uint64, one item, made when not given),
    on the GPU: read it after the stream. Returns (keys_out, values_out, num_selected). With op, an equality of
    the caller's (bool(K, K): "a / 10 == b / 10"), keys of any of kiln.operators' dtypes."""
    handle = _stream_handle(stream)
    k = _Array(keys, "keys_in", "unique_by_key", handle)
    ko, vo, count = keys_out, values_out, num_selected
    if keys_out is None:
        keys_out, ko = _allocate(k, (k.size,), k.dtype, "unique_by_key", "keys_out")
    if values_out is None:
        values_out, vo = _allocate(k, (k.size,), "int32", "unique_by_key", "values_out")
    if num_selected is None:
        num_selected, count = _allocate(k, (1,), "uint64", "unique_by_key", "num_selected")
    if op is not None:
        from . import operators

        operators._unique_by_key(k, values, ko, vo, count, op, handle)
    else:
        _once("unique_by_key", "unique_by_key", (k, values, ko, vo, count), (k.size, 0), handle)
    return keys_out, values_out, num_selected


def select_indices(mask, out=None, count=None, stream=None, dtype="int64"):
    """The indices of mask's nonzero items (uint8 or bool), in order, written to the front of out (int32 or
    int64: out's dtype, else `dtype`), and how many to count (one item, on the GPU). Returns (out, count):
    out[:int(count[0])] are the indices."""
    handle = _stream_handle(stream)
    a = _Array(mask, "mask", "select_indices", handle)
    if out is None:
        out, o = _allocate(a, (a.size,), dtype, "select_indices", "out")
    else:
        o = _Array(out, "out", "select_indices", handle)
    c = count
    if count is None:
        count, c = _allocate(a, (1,), o.dtype, "select_indices", "count")
    _once("select_indices", "select_indices", (a, o, c), (a.size, 0), handle)
    return out, count


def _search(primitive, haystack, needles, out, stream):
    handle = _stream_handle(stream)
    h, k = _Array(haystack, "haystack", primitive, handle), _Array(needles, "needles", primitive, handle)
    o = out
    if out is None:
        out, o = _allocate(k, (k.size,), "int64", primitive, "out")
    _once(primitive, primitive, (h, k, o), (h.size, k.size), handle)
    return out


def lower_bound(haystack, needles, out=None, stream=None):
    """For each needle, the first position in the sorted haystack whose item is not less (searchsorted,
    side='left'; int32, int64, uint64, float64). Returns out (int64)."""
    return _search("lower_bound", haystack, needles, out, stream)


def upper_bound(haystack, needles, out=None, stream=None):
    """For each needle, the first position in the sorted haystack whose item is greater (searchsorted,
    side='right'). Returns out (int64)."""
    return _search("upper_bound", haystack, needles, out, stream)


def segmented_sort(keys, offsets, keys_out=None, stream=None):
    """Sorts (int32, float64) keys ascending within each segment [offsets[i], offsets[i+1]) into keys_out
    (items outside every segment are not written: in a keys_out made here they are undefined).
    Returns keys_out."""
    handle = _stream_handle(stream)
    k = _Array(keys, "keys_in", "segmented_sort", handle)
    o = _Array(offsets, "offsets", "segmented_sort", handle)
    segments = max(o.size - 1, 0)
    ko = keys_out
    if keys_out is None:
        keys_out, ko = _allocate(k, (k.size,), k.dtype, "segmented_sort", "keys_out")
    _once("segmented_sort", "segmented_sort", (k, ko, o), (k.size, segments), handle)
    return keys_out
