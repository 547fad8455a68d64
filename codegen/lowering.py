"""Lowered (mangled) kernel names, from NVRTC at build time: the build's lower step.

nvcc compiles the cubins, but only NVRTC can say which symbol a C++ name expression such as
`scale<float>` becomes (nvrtcGetLoweredName). The generated translation unit is the same for both
compilers, so the names agree; the catalog step checks each one against every cubin's symbol table.
A front-end-only compile (-fdevice-syntax-only) is enough and takes well under a second.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import cuda_toolkit
import errors
import render
import spec as specmod
import unit_source


# Options kiln gives NVRTC and never nvcc, at build time and at run time (runtime/src/jit_compile.cpp):
# -default-device makes functions without an execution space __device__ instead of rejecting them, as
# nvcc accepts them in host-side declarations that device code never calls (CUB's tuning headers).
NVRTC_ONLY_OPTIONS = ("-default-device",)


class LoweringError(Exception):
    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


class _Nvrtc:
    def __init__(self, library: str):
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as e:
            raise LoweringError(f"cannot load NVRTC ({library}): {e}; check -Dtoolkit") from None
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def call(self, fn: str, *args):
        rc = getattr(self.lib, fn)(*args)
        if rc != 0:
            raise LoweringError(f"{fn} failed: {self.lib.nvrtcGetErrorString(rc).decode()}")
        return rc


def lower_names(nvrtc_library: str, source: str, source_name: str, expressions: list[str],
                options: list[str]) -> dict[str, str]:
    """{expression: lowered name} for every expression, or LoweringError carrying NVRTC's log."""
    nvrtc = _Nvrtc(nvrtc_library)
    lib = nvrtc.lib
    prog = ctypes.c_void_p()
    nvrtc.call("nvrtcCreateProgram", ctypes.byref(prog), source.encode(), source_name.encode(), 0, None, None)
    try:
        for e in expressions:
            nvrtc.call("nvrtcAddNameExpression", prog, e.encode())
        argv = [o.encode() for o in options]
        rc = lib.nvrtcCompileProgram(prog, len(argv), (ctypes.c_char_p * len(argv))(*argv))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        log_text = log.value.decode(errors="replace")
        if rc != 0:
            raise LoweringError(f"NVRTC failed: {lib.nvrtcGetErrorString(rc).decode()}", log_text)
        names = {}
        for e in expressions:
            out = ctypes.c_char_p()
            rc = lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(out))
            if rc != 0 or not out.value:
                raise LoweringError(f"name expression {e!r} does not name a __global__ function NVRTC can "
                                    f"instantiate ({lib.nvrtcGetErrorString(rc).decode()})", log_text)
            names[e] = out.value.decode()
        return names
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def lower_unit(desc: dict, source: Path, nvrtc: str, cuda_root: Path, output: Path) -> None:
    """Write {name expression: mangled name} for a unit's kernels to `output`, from NVRTC."""
    lowest = min(specmod.parse_target(t)[0] for t in desc["targets"])
    options = [*unit_source.compiler_options(desc), *(f"-I{d}" for d in cuda_toolkit.include_dirs(cuda_root)),
               f"-arch=compute_{lowest}", *NVRTC_ONLY_OPTIONS, "-fdevice-syntax-only"]
    expressions = [k["expression"] for k in desc["kernels"]]
    try:
        names = lower_names(str(nvrtc), source.read_text(encoding="utf-8"), source.name, expressions, options)
    except LoweringError as e:
        raise errors.GenError(f"{desc['where']}: field 'kernels': {e}\n{e.log}") from None
    render.write_json(output, dict(sorted(names.items())))
