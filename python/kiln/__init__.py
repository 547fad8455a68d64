"""kiln from Python: CUDA kernels ready at once, through kiln's tiers (memory, embedded, disk, remote, JIT).

The logic is libkiln's (C++); this package re-exports its bindings (kiln._kiln). Importing it needs no GPU
and no CUDA driver: libkiln loads the driver on the first get() or launch.

    import kiln
    program = kiln.Program(source, name_expressions=["scale<float>"], label="filters")
    scale = program.get("scale<float>")
    scale((blocks,), (256,), [x, y, numpy.float32(2), numpy.int32(n)], stream=cupy_stream)

Kernel arguments go as CuPy's RawKernel passes them (a program's parameter types are not known here): a
device array (any object with __cuda_array_interface__ or DLPack's __dlpack__: CuPy, PyTorch on CUDA, Numba,
JAX) as its data pointer,
a NumPy scalar as its dtype, a Python int as int64, a float as float64, None as a null pointer. Give a
float parameter numpy.float32 and an int parameter numpy.int32.

kiln's primitives (scan, reduce, sorts, select, unique-by-key, searches) run on the same arrays, as plans or
one-shot calls (kiln/primitives.py): prefix = kiln.exclusive_sum(cupy_array, stream=s). Reduce, scans,
transform, select, sorts and unique-by-key also take an operator as CUDA C++ text (kiln/operators.py):
largest = kiln.reduce(cupy_array, "a > b ? a : b", -numpy.inf).

A device argument left None (every one's default) is the current CUDA context's device, as CuPy's and
PyTorch's current device is. Errors are kiln.Error, whose .code names the kind ("compile", "unknown_kernel",
"no_driver", ...).
docs/python.md is the guide.
"""

from ._kiln import (
    DemandRecord,
    DeviceInfo,
    Error,
    Kernel,
    KernelStatus,
    LoadPlan,
    PrecompileResult,
    Program,
    ProgramSource,
    RecordedKernel,
    Registry,
    WarmupStatus,
    compile_all,
    examples_registry,
    precompile_record,
    primitives_registry,
    program,
    read_record,
    record_demand,
)
from .primitives import *  # noqa: F403 (kiln.exclusive_sum, kiln.make_exclusive_sum, ...: its __all__)
from .primitives import __all__ as _primitive_names
from .operators import *  # noqa: F403 (kiln.Operator, kiln.reduce, kiln.make_reduce, ...: its __all__)
from .operators import __all__ as _operator_names

Plan = LoadPlan  # its name before kiln::LoadPlan; the same class

__all__ = [
    "DemandRecord",
    "DeviceInfo",
    "Error",
    "Kernel",
    "KernelStatus",
    "LoadPlan",
    "Plan",
    "PrecompileResult",
    "Program",
    "ProgramSource",
    "RecordedKernel",
    "Registry",
    "WarmupStatus",
    "compile_all",
    "examples_registry",
    "precompile_record",
    "primitives_registry",
    "program",
    "read_record",
    "record_demand",
] + _primitive_names + _operator_names


def _fields_repr(self) -> str:
    """kiln.Name(field=value, ...) of a status object's fields, each value cut to 60 characters."""
    fields = []
    for name in dir(type(self)):
        if name.startswith("_"):
            continue
        value = getattr(self, name)
        if callable(value):
            continue
        shown = repr(value)
        fields.append(f"{name}={shown if len(shown) <= 60 else shown[:57] + '...'}")
    return f"kiln.{type(self).__name__}({', '.join(fields)})"


for _status in (PrecompileResult, WarmupStatus, KernelStatus, DeviceInfo, RecordedKernel, ProgramSource, DemandRecord):
    _status.__repr__ = _fields_repr
del _status
