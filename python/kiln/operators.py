"""kiln's primitives with an operator given as CUDA C++ text (libkiln_prim's ReduceWith, ExclusiveScanWith, ...).

An operator is a kiln.Operator, or a str that kiln makes one of: a __device__ function named `op` (or the
name given), or an expression over the parameters the primitive passes, a and b (binary operators,
comparisons, equalities) or x (transforms, predicates), which kiln wraps in a function of the primitive's
signature for the arrays' dtype (T names it):

    m = kiln.reduce(x, "a > b ? a : b", -numpy.inf)                 # a 0-d array of x's library
    kiln.inclusive_scan(x, kiln.Operator("__device__ float op(float a, float b) { return fmaxf(a, b); }"))
    plan = kiln.make_reduce(x, out, "a > b ? a : b")                 # linked now, on x's device
    plan(temp, x, out, x.size, -numpy.inf, stream=s)                  # plan(None, x, out, n, init): the size

The dtypes are int32, uint32, int64, uint64, float32 and float64, and NumPy structured dtypes of 4, 8 or 16
bytes (CuPy arrays of such a dtype, or any array whose __cuda_array_interface__ describes one): kiln declares
the struct (kiln/structs.py), T names it, and its items travel through the kernels of their size (uint32,
uint64, 16 bytes) as their bytes, which kiln hands the operator as the struct. The first use of an operator
text in a process links it into kiln's kernels: from the disk cache (another process linked it), the remote cache,
or a compile of the operator alone and an nvJitLink link (hundreds of milliseconds); later uses in the
process find its plan in memory. Arrays, outputs, streams and temporary storage are as kiln's other
primitives take them (kiln/primitives.py). docs/python.md is the guide.
"""

import struct

from . import _kiln, structs
from ._kiln import Operator
from .primitives import (
    ArgumentError,
    ArgumentTypeError,
    _LEAST,
    _NO_STREAM,
    _STRUCTURED,
    _WRITTEN,
    _allocate,
    _Array,
    _checked_arrays,
    _count,
    _run_once,
    _stream_handle,
    _temp_storage,
)

__all__ = [
    "Operator",
    "OperatorPlan",
    "exclusive_scan",
    "inclusive_scan",
    "make_exclusive_scan",
    "make_inclusive_scan",
    "make_reduce",
    "make_select_if",
    "make_transform",
    "make_transform_reduce",
    "operator_families",
    "reduce",
    "select_if",
    "transform",
    "transform_reduce",
]

_DTYPES = ("int32", "uint32", "int64", "uint64", "float32", "float64")
_SUPPORTED = "an operator takes " + ", ".join(_DTYPES) + " or a structured dtype of 4, 8 or 16 bytes"
# A structured dtype's items go through the kernels of the dtype of their size, as its bytes.
_CARRIERS = {4: "uint32", 8: "uint64", 16: "bytes16"}


class _Types:
    """The item types an operator plan takes: the six dtypes, and structured dtypes (their size checked by
    _checked)."""

    def __contains__(self, dtype):
        return dtype in _DTYPES or dtype in _STRUCTURED


_TYPES = _Types()
_PACK = {"int32": "=i", "uint32": "=I", "int64": "=q", "uint64": "=Q", "float32": "=f", "float64": "=d"}

# What each family takes, in its C++ plan's order: (role, dtype, least item count), as primitives._ROLES;
# the size its call takes ("n": items, "m": segments); whether it takes an init value.
_ROLES = {
    "reduce": (("d_in", "T", "n"), ("d_out", "T", 1)),
    "exclusive_scan": (("d_in", "T", "n"), ("d_out", "T", "n")),
    "inclusive_scan": (("d_in", "T", "n"), ("d_out", "T", "n")),
    "transform": (("d_in", "T", "n"), ("d_out", "T", "n")),
    "transform_reduce": (("d_in", "T", "n"), ("d_out", "T", 1)),
    "segmented_reduce": (("d_in", "T", None), ("d_out", "T", "m"), ("offsets", ("int32",), "m+1")),
    "merge_sort_pairs": (("keys", "T", "n"), ("values", ("int32",), "n")),
    "select_if": (("d_in", "T", "n"), ("out", "T", "n"), ("count", ("int64",), 1)),
    "unique_by_key": (("keys_in", "T", "n"), ("values_in", ("int32",), "n"), ("keys_out", "T", "n"),
                      ("values_out", ("int32",), "n"), ("num_selected", ("uint64",), 1)),
}
# Each family's roles as a call checks them, as primitives._CHECKS.
_CHECKS = {family: tuple((role, want, _LEAST[least], role in _WRITTEN) for role, want, least in roles)
           for family, roles in _ROLES.items()}
_SIZE = {family: "m" if family == "segmented_reduce" else "n" for family in _ROLES}
_INIT = {"reduce", "exclusive_scan", "transform_reduce", "segmented_reduce"}

_plans = {}  # (family, dtype, device, operators' keys) -> _kiln._OperatorPlan: one of each for the process


def _operator(op, role, family):
    """`op` (a kiln.Operator or a str) as a kiln.Operator, and its key in _plans."""
    if isinstance(op, Operator):
        return op, op._key()
    if isinstance(op, str):
        return None, op
    raise ArgumentTypeError(f"kiln.{family}: {role} is a {type(op).__name__}; give CUDA C++ text (a str) or a "
                            "kiln.Operator")


def _struct(dtype, family):
    """A structured dtype's C++ struct (kiln/structs.py) and the dtype whose kernels carry its items."""
    numpy_dtype = _STRUCTURED[dtype]
    return structs.cpp_struct(numpy_dtype, f"kiln.{family}: the dtype"), _CARRIERS[numpy_dtype.itemsize]


def _native(family, dtype, device, ops):
    """The C++ plan of `family` for dtype on device with the operators `ops` ((role, op) pairs), made once."""
    given = [_operator(op, role, family) for role, op in ops]
    key = (family, dtype, device) + tuple(k for _, k in given)
    made = _plans.get(key)
    if made is None:
        operators = [op if op is not None else Operator(text) for op, text in given]
        if dtype in _STRUCTURED:
            struct, carrier = _struct(dtype, family)
            made = _kiln._operator_plan(family, carrier, operators, device, struct.name, struct.declaration)
        else:
            made = _kiln._operator_plan(family, dtype, operators, device)
        _plans[key] = made
    return made


def _init_bytes(init, dtype, family):
    """init as the bytes of one `dtype` value: an int (or what has __index__) for integers, a real number for
    floats, one item of a structured dtype (kiln/structs.py's value_bytes)."""
    if dtype in _STRUCTURED:
        if init is None:
            raise ArgumentTypeError(f"kiln.{family}: init must be one {dtype} value, not None")
        return structs.value_bytes(init, _STRUCTURED[dtype], f"kiln.{family}: init")
    if isinstance(init, bool) or init is None:
        raise ArgumentTypeError(f"kiln.{family}: init must be one {dtype} value, not {init!r}")
    try:
        value = int(init.__index__()) if dtype[0] in "iu" else float(init)
    except (AttributeError, TypeError, ValueError):
        raise ArgumentTypeError(f"kiln.{family}: init must be one {dtype} value, not {init!r}") from None
    try:
        return struct.pack(_PACK[dtype], value)
    except (struct.error, OverflowError):
        raise ArgumentError(f"kiln.{family}: init {init!r} does not fit {dtype}") from None


class _WithInit:
    """A _kiln._OperatorPlan with one call's init, as primitives._run_once calls a _kiln._Primitive."""

    __slots__ = ("native", "init", "segments")

    def __init__(self, native, init, segments):
        self.native, self.init, self.segments = native, init, segments

    def temp_bytes(self, n, m):
        return self.native.temp_bytes(m if self.segments else n)

    def run(self, pointers, n, m, temp, temp_bytes, stream):
        self.native.run(pointers, m if self.segments else n, self.init, temp, temp_bytes, stream)

    def run_once(self, pointers, n, m, stream):
        self.native.run_once(pointers, m if self.segments else n, self.init, stream)


def _checked(family, objs, sizes=None, stream=_NO_STREAM):
    arrays, dtype, device = _checked_arrays(family, _CHECKS[family], 0, _TYPES, _SUPPORTED, objs, sizes, stream)
    if dtype in _STRUCTURED:
        size = _STRUCTURED[dtype].itemsize
        if size not in _CARRIERS:
            raise ArgumentTypeError(f"kiln.{family}: the structured dtype {dtype} is {size} bytes; an operator takes "
                                    "structs of 4, 8 or 16 bytes, whose items kiln's kernels of those sizes carry; pad the dtype "
                                    "(numpy.dtype(..., itemsize=16)) and copy the items into an array of it")
        # the kernels read and write the items as integers of their size: aligned to it
        for a, (role, want, _, _) in zip(arrays, _CHECKS[family]):
            if want == "T" and a.pointer % size:
                raise ArgumentError(f"kiln.{family}: {role} is at {a.pointer:#x}, not aligned to its {size}-byte "
                                    "items, which kiln's kernels read as integers of that size")
    return arrays, dtype, device


def _once(family, ops, objs, sizes, init, stream):
    """A one-shot call: arrays checked, the plan found or made, temporary storage as kiln's primitives';
    `stream` a handle (primitives._stream_handle)."""
    arrays, dtype, device = _checked(family, objs, sizes, stream)
    value = _init_bytes(init, dtype, family) if family in _INIT else b""
    native = _native(family, dtype, device, ops)
    _run_once(_WithInit(native, value, _SIZE[family] == "m"), arrays, sizes, stream)


class OperatorPlan:
    """A plan of one of kiln's primitives with its operators linked in, for one dtype on one device
    (kiln.make_reduce, ...): plan(temp, *arrays, size[, init], stream=None), as kiln.Primitive's plans; with
    temp None it returns the bytes of temporary storage needed and runs nothing."""

    __slots__ = ("_family", "_native", "dtype", "device")

    def __init__(self, family, ops, objs):
        _, self.dtype, self.device = _checked(family, objs)
        self._family = family
        self._native = _native(family, self.dtype, self.device, ops)

    @property
    def source(self):
        """Where its linked kernels came from: jit (linked in this process), disk or remote."""
        return self._native.source

    def temp_bytes(self, size):
        """The temporary storage a call with `size` items (segments, for a segmented reduce) needs, in bytes."""
        return self._native.temp_bytes(_count(size, _SIZE[self._family], self._family))

    def __call__(self, temp, *args, stream=None):
        roles = _ROLES[self._family]
        takes_init = self._family in _INIT
        if len(args) != len(roles) + 1 + takes_init:
            raise ArgumentTypeError(f"kiln.{self._family}: the arrays {', '.join(r for r, _, _ in roles)}, then "
                                    f"{_SIZE[self._family]}" + (" and init" if takes_init else "") + " are expected")
        objs, size = args[:len(roles)], _count(args[len(roles)], _SIZE[self._family], self._family)
        sizes = (0, size) if _SIZE[self._family] == "m" else (size, 0)
        handle = _stream_handle(stream)
        arrays, dtype, device = _checked(self._family, objs, sizes, handle)
        if dtype != self.dtype or device != self.device:
            raise ArgumentError(f"kiln.{self._family}: this plan is for {self.dtype} on device {self.device}, "
                                f"not {dtype} on device {device}")
        init = _init_bytes(args[-1], dtype, self._family) if takes_init else b""
        if temp is None:
            return self._native.temp_bytes(size)
        storage = _temp_storage(temp, self._family, handle)
        self._native.run([a.pointer for a in arrays], size, init, storage.pointer, storage.nbytes, handle)
        return None

    def __repr__(self):
        return f"<kiln.{self._family} plan {self.dtype} on device {self.device}, operators linked ({self.source})>"


# ---- plans -------------------------------------------------------------------------------------------------


def make_reduce(d_in, d_out, op):
    """A plan of out[0] = op(init, in[0], ..., in[n-1]) in CUB's tree order (op associative, T(T, T)):
    plan(temp, d_in, d_out, n, init, stream=None)."""
    return OperatorPlan("reduce", (("op", op),), (d_in, d_out))


def make_exclusive_scan(d_in, d_out, op):
    """A plan of out[0] = init, out[i] = op(out[i-1], in[i-1]): plan(temp, d_in, d_out, n, init, stream=None)."""
    return OperatorPlan("exclusive_scan", (("op", op),), (d_in, d_out))


def make_inclusive_scan(d_in, d_out, op):
    """A plan of out[0] = in[0], out[i] = op(out[i-1], in[i]): plan(temp, d_in, d_out, n, stream=None)."""
    return OperatorPlan("inclusive_scan", (("op", op),), (d_in, d_out))


def make_transform(d_in, d_out, op):
    """A plan of out[i] = op(in[i]) (T(T); d_out may be d_in): plan(temp, d_in, d_out, n, stream=None). It needs
    no storage: temp may be any device array, even of 0 bytes (None asks the size, 0, and runs nothing)."""
    return OperatorPlan("transform", (("op", op),), (d_in, d_out))


def make_transform_reduce(d_in, d_out, transform_op, reduce_op):
    """A plan of out[0] = reduce_op(init, transform_op(in[0]), ...): plan(temp, d_in, d_out, n, init,
    stream=None). Two definitions need two names (an expression's are transform_op and reduce_op)."""
    return OperatorPlan("transform_reduce", (("transform_op", transform_op), ("reduce_op", reduce_op)),
                        (d_in, d_out))


def make_select_if(d_in, out, count, op):
    """A plan writing the items for which op (bool(T)) is true to the front of out, in order, and their number
    to count (int64, one item): plan(temp, d_in, out, count, n, stream=None)."""
    return OperatorPlan("select_if", (("op", op),), (d_in, out, count))


def _make_segmented_reduce(d_in, d_out, offsets, op):
    return OperatorPlan("segmented_reduce", (("op", op),), (d_in, d_out, offsets))


def _make_merge_sort_pairs(keys, values, op):
    return OperatorPlan("merge_sort_pairs", (("op", op),), (keys, values))


def _make_unique_by_key(keys_in, values_in, keys_out, values_out, num_selected, op):
    return OperatorPlan("unique_by_key", (("op", op),), (keys_in, values_in, keys_out, values_out, num_selected))


# ---- one-shot calls ----------------------------------------------------------------------------------------


def _in_out(family, d_in, ops, init, d_out, stream, scalar=False):
    """A one-shot call of a family taking d_in and d_out, d_out made when not given (0-d for a `scalar` one,
    else as long as d_in). Returns d_out."""
    handle = _stream_handle(stream)
    a = _Array(d_in, "d_in", family, handle)
    out = d_out
    if d_out is None:
        d_out, out = _allocate(a, () if scalar else (a.size,), a.dtype, family, "d_out")
    _once(family, ops, (a, out), (a.size, 0), init, handle)
    return d_out


def reduce(d_in, op, init, d_out=None, stream=None):
    """op(init, d_in[0], ..., d_in[n-1]) in CUB's tree order (op associative: "a + b", "a > b ? a : b"),
    written to d_out's first item (made 0-d when not given). Returns d_out."""
    return _in_out("reduce", d_in, (("op", op),), init, d_out, stream, scalar=True)


def exclusive_scan(d_in, op, init, d_out=None, stream=None):
    """out[0] = init, out[i] = op(out[i-1], d_in[i-1]); d_out may be d_in. Returns d_out."""
    return _in_out("exclusive_scan", d_in, (("op", op),), init, d_out, stream)


def inclusive_scan(d_in, op, d_out=None, stream=None):
    """out[0] = d_in[0], out[i] = op(out[i-1], d_in[i]); d_out may be d_in. Returns d_out."""
    return _in_out("inclusive_scan", d_in, (("op", op),), None, d_out, stream)


def transform(d_in, op, d_out=None, stream=None):
    """out[i] = op(d_in[i]) (op T(T), an expression over x: "x * x"); d_out may be d_in. Returns d_out."""
    return _in_out("transform", d_in, (("op", op),), None, d_out, stream)


def transform_reduce(d_in, transform_op, reduce_op, init, d_out=None, stream=None):
    """reduce_op(init, transform_op(d_in[0]), ...), the transform applied as items are read (nothing stored):
    kiln.transform_reduce(x, "x * x", "a + b", 0.0) is the sum of squares. Returns d_out (0-d when made)."""
    return _in_out("transform_reduce", d_in, (("transform_op", transform_op), ("reduce_op", reduce_op)), init, d_out,
                   stream, scalar=True)


def select_if(d_in, op, out=None, count=None, stream=None):
    """The items of d_in for which op (bool(T), an expression over x: "x > 0") is true, in order, written to
    the front of out, and how many to count (int64, one item, on the GPU). Returns (out, count):
    out[:int(count[0])] are the items."""
    handle = _stream_handle(stream)
    a = _Array(d_in, "d_in", "select_if", handle)
    o, c = out, count
    if out is None:
        out, o = _allocate(a, (a.size,), a.dtype, "select_if", "out")
    if count is None:
        count, c = _allocate(a, (1,), "int64", "select_if", "count")
    _once("select_if", (("op", op),), (a, o, c), (a.size, 0), None, handle)
    return out, count


def _segmented_reduce(a, o, op, init, d_out, stream):
    """kiln.segmented_reduce with an operator (kiln/primitives.py hands it d_in and offsets described, and the
    stream's handle)."""
    if init is None:
        raise ArgumentTypeError("kiln.segmented_reduce: an operator needs init, the value of an empty segment")
    segments = max(o.size - 1, 0)
    out = d_out
    if d_out is None:
        d_out, out = _allocate(a, (segments,), a.dtype, "segmented_reduce", "d_out")
    _once("segmented_reduce", (("op", op),), (a, out, o), (0, segments), init, stream)
    return d_out


def _merge_sort_pairs(k, values, op, stream):
    _once("merge_sort_pairs", (("op", op),), (k, values), (k.size, 0), None, stream)


def _unique_by_key(k, values, keys_out, values_out, num_selected, op, stream):
    _once("unique_by_key", (("op", op),), (k, values, keys_out, values_out, num_selected), (k.size, 0), None,
          stream)


def operator_families():
    """{family: number of operators}: the primitives this package can link operators into ({} without them)."""
    return dict(_kiln._operator_families())

