"""kiln's primitives (libkiln_prim: CUB's scan, reduce, sorts, select, unique-by-key and searches) on device arrays.

Any object with __cuda_array_interface__ (CuPy, PyTorch on CUDA, Numba) is an array here: contiguous, its
items counted flat, its dtype checked against the types the package's libkiln_prim instantiates. Each
primitive comes two ways, as cuda.compute's do:

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

from . import _kiln
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


class _Array:
    """One argument's array interface: its pointer, item count, dtype name and device."""

    __slots__ = ("obj", "pointer", "size", "nbytes", "dtype", "device")

    def __init__(self, obj, role, primitive):
        try:
            cai = obj.__cuda_array_interface__
        except AttributeError:
            raise ArgumentTypeError(
                f"kiln.{primitive}: {role} ({type(obj).__name__}) is not a device array; pass an object with "
                "__cuda_array_interface__ (a CuPy array, a PyTorch CUDA tensor, a Numba device array)") from None
        # What another library's object says of itself is checked before any of it reaches C++ or the driver.
        def refused(kind, what):
            return kind(f"kiln.{primitive}: {role} ({type(obj).__name__}): its __cuda_array_interface__ {what}")
        if not isinstance(cai, dict):
            raise refused(ArgumentTypeError, f"is a {type(cai).__name__}, not a dict")
        for key in ("shape", "typestr", "data"):
            if key not in cai:
                raise refused(ArgumentTypeError, f"has no '{key}'")
        shape, typestr, data = _ints(cai["shape"]), cai["typestr"], cai["data"]
        if shape is None:
            raise refused(ArgumentTypeError, f"has a shape {cai['shape']!r}, not a tuple of ints")
        size = 1
        for extent in shape:
            if extent < 0:
                raise refused(ArgumentError, f"has a shape {tuple(shape)!r}: an extent below 0")
            size *= extent
        if type(typestr) is not str:
            raise refused(ArgumentTypeError, f"has a typestr {typestr!r}, not a str")
        self.dtype, itemsize = _typestr(typestr)
        pointer = _ints(data[:1]) if type(data) in (tuple, list) and data else None
        if pointer is None:
            raise refused(ArgumentTypeError, f"has data {data!r}, not (pointer, read_only)")
        pointer = pointer[0]
        if size > _MAX_BYTES or size * itemsize > _MAX_BYTES:
            raise refused(ArgumentError, f"has a shape {tuple(shape)!r}: {size} items of {itemsize} bytes, more than "
                                         "a device array can hold")
        if pointer < 0 or pointer + size * itemsize > _ADDRESS_END:
            raise refused(ArgumentError, f"has a pointer {pointer:#x}, not a 64-bit device address (of "
                                         f"{size * itemsize} bytes)")
        strides = cai.get("strides")
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
                raise ArgumentError(f"kiln.{primitive}: {role} is not contiguous (strides {tuple(strides)}); "
                                    "pass a C-contiguous array (cupy.ascontiguousarray, tensor.contiguous())")
        if cai.get("mask") is not None:
            raise ArgumentError(f"kiln.{primitive}: {role} is a masked array")
        self.obj = obj
        self.pointer = pointer
        self.size = size
        self.nbytes = size * itemsize
        self.device = _device_of(obj)


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

_made = {}  # (kind, dtype, device) -> _kiln._Primitive: the process keeps one of each, as libkiln_prim does


def _primitive_of(kind, dtype, device):
    key = (kind, dtype, device)
    made = _made.get(key)
    if made is None:
        made = _made[key] = _kiln._primitive(kind, dtype, device)
    return made


def _least(least, n, m):
    if least == "n":
        return n
    if least == "m":
        return m
    if least == "m+1":
        return m + 1
    return least or 0


def _checked(primitive, kind, objs, sizes=None):
    """The arrays of a call checked against the primitive's roles; its dtype; its device; the sizes given
    (n, m) with the least counts checked."""
    types = primitive_types().get(kind, ())
    return _checked_arrays(primitive, _ROLES[primitive], _TYPED_INDEX[primitive], types,
                           _supported(primitive, types), objs, sizes)


def _checked_arrays(primitive, roles, typed, types, supported, objs, sizes):
    """_checked for any roles: the dtype of the array at `typed` must be one of `types` (else the error
    says `supported`)."""
    arrays = [obj if obj.__class__ is _Array else _Array(obj, role, primitive)
              for obj, (role, _, _) in zip(objs, roles)]
    dtype = arrays[typed].dtype
    if dtype not in types:
        raise ArgumentTypeError(f"kiln.{primitive}: {roles[typed][0]} is {dtype}; {supported}")
    device = None
    for a, (role, want, least) in zip(arrays, roles):
        if a.dtype != dtype if want == "T" else a.dtype not in want:
            if want == "T":
                raise ArgumentTypeError(f"kiln.{primitive}: {role} is {a.dtype}, {roles[typed][0]} {dtype}; "
                                        "they must match")
            raise ArgumentTypeError(f"kiln.{primitive}: {role} is {a.dtype}; it must be {' or '.join(want)}")
        if a.device is not None:
            if device is not None and a.device != device:
                raise ArgumentError(f"kiln.{primitive}: {role} is on device {a.device}, the other arrays on {device}")
            device = a.device
        if sizes is not None and a.size < _least(least, *sizes):
            raise ArgumentError(f"kiln.{primitive}: {role} has {a.size} items; the call needs "
                                f"{_least(least, *sizes)}")
    return arrays, dtype, (0 if device is None else device)


def _count(value, what, primitive):
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArgumentTypeError(f"kiln.{primitive}: {what} must be an int >= 0, not {value!r}")
    if value < 0 or value > _MAX_BYTES:
        raise ArgumentError(f"kiln.{primitive}: {what} must be an int >= 0 that fits 63 bits, not {value!r}")
    return value


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
        arrays, dtype, device = _checked(self._primitive, self._kind, objs, (n, m))
        if dtype != self.dtype or device != self.device:
            raise ArgumentError(f"kiln.{self._primitive}: this plan is for {self.dtype} on device {self.device}, "
                                f"not {dtype} on device {device}")
        if temp is None:
            return self._native.temp_bytes(n, m)
        storage = _Array(temp, "temp", self._primitive)
        self._native.run([a.pointer for a in arrays], n, m, storage.pointer, storage.nbytes, stream)
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
    arrays, dtype, device = _checked(primitive, kind, objs, sizes)
    _run_once(_primitive_of(kind, dtype, device), arrays, sizes, stream)


def _run_once(native, arrays, sizes, stream):
    """A one-shot call of `native` (a _kiln._Primitive, or what has its temp_bytes, run and run_once) on
    checked arrays, its temporary storage as _once says."""
    pointers = [a.pointer for a in arrays]
    if _library_temp:
        nbytes = native.temp_bytes(sizes[0], sizes[1])
        temp, pointer = _library_storage(arrays[0].obj, nbytes, stream) if nbytes else (None, 0)
        if temp is not None or nbytes == 0:
            # temp is given back to its pool when this returns: the pool reuses it in its stream's order,
            # after the work enqueued here.
            native.run(pointers, sizes[0], sizes[1], pointer, nbytes, stream)
            return
    native.run_once(pointers, sizes[0], sizes[1], stream)


def _library_of(obj):
    """The library an array comes from, by its type's module: "cupy", "torch", "numba", ..."""
    return type(obj).__module__.partition(".")[0]


def _empty(library, like, shape, dtype):
    """An array of `library` ("cupy" or "torch") on the device of `like`, from its pool on its current stream;
    None for another library."""
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(_device_of(like)):
            return cupy.empty(shape, dtype=dtype)
    if library == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    return None


def _current_stream(library, like):
    """The stream `library` allocates on for the device of `like` (its current stream), as an int; None for
    another library."""
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(_device_of(like)):
            return cupy.cuda.get_current_stream().ptr
    if library == "torch":
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream
    return None


def _library_storage(like, nbytes, stream):
    """(array, its address): nbytes of temporary storage from the pool of the library `like` comes from, when
    the call's stream is that library's current stream; else (None, 0). A pool reuses a block freed on the
    stream it was allocated on without waiting: on the call's stream that is ordered after the call, on
    another stream it would not be."""
    library = _library_of(like)
    current = _current_stream(library, like)
    if current is None or current != _kiln._stream_handle(stream):
        return None, 0
    temp = _empty(library, like, (nbytes,), "uint8")
    # the address without __cuda_array_interface__, which PyTorch builds in Python on each read
    return temp, (temp.data.ptr if library == "cupy" else temp.data_ptr())


def _allocate(like, shape, dtype, primitive, role):
    """An output of the library `like` (an _Array) comes from, on its device."""
    like = like.obj
    made = _empty(_library_of(like), like, shape, dtype)
    if made is None:
        raise ArgumentTypeError(f"kiln.{primitive}: {role} was not given, and kiln makes outputs only for CuPy "
                                f"arrays and PyTorch tensors, not {type(like).__module__}.{type(like).__name__}: "
                                "pass it")
    return made


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
    a = _Array(d_in, "d_in", "exclusive_sum")
    if d_out is None:
        d_out = _allocate(a, (a.size,), a.dtype, "exclusive_sum", "d_out")
    _once("exclusive_sum", "exclusive_sum", (a, d_out), (a.size, 0), stream)
    return d_out


def reduce_sum(d_in, d_out=None, stream=None):
    """The sum of d_in (int32, float64), in CUB's order, written to d_out's first item (made 0-d when not
    given, as cupy.sum's). Returns d_out."""
    a = _Array(d_in, "d_in", "reduce_sum")
    if d_out is None:
        d_out = _allocate(a, (), a.dtype, "reduce_sum", "d_out")
    _once("reduce_sum", "reduce_sum", (a, d_out), (a.size, 0), stream)
    return d_out


def segmented_reduce(d_in, offsets, op="sum", d_out=None, stream=None, init=None):
    """out[i] = op over d_in[offsets[i], offsets[i+1]) for each of the len(offsets) - 1 segments (op "sum":
    int32, float64; "min", "max": float64; CUB's start values for empty segments). Returns d_out. op may be
    an operator of the caller's (CUDA C++ text or a kiln.Operator, T(T, T): "a > b ? a : b"); then init is
    needed (op(init, ...) of each segment, an empty one's value)."""
    fixed = _fixed(op)
    a, o = _Array(d_in, "d_in", "segmented_reduce"), _Array(offsets, "offsets", "segmented_reduce")
    if not fixed:
        from . import operators

        return operators._segmented_reduce(a, o, op, init, d_out, stream)
    if init is not None:
        raise ArgumentError(f"kiln.segmented_reduce: op {op!r} takes no init (its start value is CUB's)")
    kind = "segmented_" + op
    segments = max(o.size - 1, 0)
    if d_out is None:
        d_out = _allocate(a, (segments,), a.dtype, "segmented_reduce", "d_out")
    _once("segmented_reduce", kind, (a, d_out, o), (0, segments), stream)
    return d_out


def merge_sort_pairs(keys, values, stream=None, op=None):
    """Sorts uint64 keys ascending in place, stable, moving int32 values with them. Returns (keys, values).
    With op, a comparison of the caller's (bool(K, K): "a > b" sorts descending), keys of any of
    kiln.operators' dtypes."""
    k = _Array(keys, "keys", "merge_sort_pairs")
    if op is not None:
        from . import operators

        operators._merge_sort_pairs(k, values, op, stream)
        return keys, values
    _once("merge_sort_pairs", "merge_sort_pairs", (k, values), (k.size, 0), stream)
    return keys, values


def radix_sort_pairs(keys, values, keys_out=None, values_out=None, stream=None):
    """Sorts (int32, int64, uint64, float64) keys ascending, stable, out of place, moving int32 values with them.
    Returns (keys_out, values_out)."""
    k = _Array(keys, "keys_in", "radix_sort_pairs")
    if keys_out is None:
        keys_out = _allocate(k, (k.size,), k.dtype, "radix_sort_pairs", "keys_out")
    if values_out is None:
        values_out = _allocate(k, (k.size,), "int32", "radix_sort_pairs", "values_out")
    _once("radix_sort_pairs", "radix_sort_pairs", (k, keys_out, values, values_out), (k.size, 0), stream)
    return keys_out, values_out


def unique_by_key(keys, values, keys_out=None, values_out=None, num_selected=None, stream=None, op=None):
    """Of each run of equal (int32, uint64) keys, the first key and its int32 value, compacted to the front of
    keys_out and values_out; the number of runs goes to num_selected (uint64, one item, made when not given),
    on the GPU: read it after the stream. Returns (keys_out, values_out, num_selected). With op, an equality of
    the caller's (bool(K, K): "a / 10 == b / 10"), keys of any of kiln.operators' dtypes."""
    k = _Array(keys, "keys_in", "unique_by_key")
    if keys_out is None:
        keys_out = _allocate(k, (k.size,), k.dtype, "unique_by_key", "keys_out")
    if values_out is None:
        values_out = _allocate(k, (k.size,), "int32", "unique_by_key", "values_out")
    if num_selected is None:
        num_selected = _allocate(k, (1,), "uint64", "unique_by_key", "num_selected")
    if op is not None:
        from . import operators

        operators._unique_by_key(k, values, keys_out, values_out, num_selected, op, stream)
    else:
        _once("unique_by_key", "unique_by_key", (k, values, keys_out, values_out, num_selected), (k.size, 0),
              stream)
    return keys_out, values_out, num_selected


def select_indices(mask, out=None, count=None, stream=None, dtype="int64"):
    """The indices of mask's nonzero items (uint8 or bool), in order, written to the front of out (int32 or
    int64: out's dtype, else `dtype`), and how many to count (one item, on the GPU). Returns (out, count):
    out[:int(count[0])] are the indices."""
    a = _Array(mask, "mask", "select_indices")
    if out is None:
        out = _allocate(a, (a.size,), dtype, "select_indices", "out")
    o = _Array(out, "out", "select_indices")
    if count is None:
        count = _allocate(a, (1,), o.dtype, "select_indices", "count")
    _once("select_indices", "select_indices", (a, o, count), (a.size, 0), stream)
    return out, count


def _search(primitive, haystack, needles, out, stream):
    h, k = _Array(haystack, "haystack", primitive), _Array(needles, "needles", primitive)
    if out is None:
        out = _allocate(k, (k.size,), "int64", primitive, "out")
    _once(primitive, primitive, (h, k, out), (h.size, k.size), stream)
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
    k, o = _Array(keys, "keys_in", "segmented_sort"), _Array(offsets, "offsets", "segmented_sort")
    segments = max(o.size - 1, 0)
    if keys_out is None:
        keys_out = _allocate(k, (k.size,), k.dtype, "segmented_sort", "keys_out")
    _once("segmented_sort", "segmented_sort", (k, keys_out, o), (k.size, segments), stream)
    return keys_out
