"""kiln from Python: CUDA kernels ready at once, through kiln's tiers (memory, embedded, disk, remote, JIT).

The logic is libkiln's (C++); this package re-exports its bindings (kiln._kiln). Importing it needs no GPU
and no CUDA driver: libkiln loads the driver on the first get() or launch.

    import kiln
    program = kiln.Program(source, name_expressions=["scale<float>"], label="filters")
    scale = program.get("scale<float>")
    scale((blocks,), (256,), [x, y, numpy.float32(2), numpy.int32(n)], stream=cupy_stream)

Kernel arguments go as CuPy's RawKernel passes them (a program's parameter types are not known here): a
device array (any object with __cuda_array_interface__: CuPy, PyTorch on CUDA, Numba) as its data pointer,
a NumPy scalar as its dtype, a Python int as int64, a float as float64, None as a null pointer. Give a
float parameter numpy.float32 and an int parameter numpy.int32.

Errors are kiln.Error, whose .code names the kind ("compile", "unknown_kernel", "no_driver", ...).
docs/python.md is the guide.
"""

from ._kiln import (
    DemandRecord,
    DeviceInfo,
    Error,
    Kernel,
    KernelStatus,
    Plan,
    PrecompileResult,
    Program,
    ProgramSource,
    RecordedKernel,
    Registry,
    WarmupStatus,
    examples_registry,
    precompile_record,
    program,
    read_record,
    record_demand,
)

__all__ = [
    "DemandRecord",
    "DeviceInfo",
    "Error",
    "Kernel",
    "KernelStatus",
    "Plan",
    "PrecompileResult",
    "Program",
    "ProgramSource",
    "RecordedKernel",
    "Registry",
    "WarmupStatus",
    "examples_registry",
    "precompile_record",
    "program",
    "read_record",
    "record_demand",
]
