"""Lowered (mangled) kernel names, from NVRTC at build time, and the JIT's view of the unit checked: the
build's lower step.

nvcc compiles the cubins, but only NVRTC can say which symbol a C++ name expression such as
`scale<float>` becomes (nvrtcGetLoweredName). The generated translation unit is the same for both
compilers, so the names agree; the catalog step checks each one against every cubin's symbol table.
A front-end-only compile (-fdevice-syntax-only) is enough and takes well under a second.

That compile is the JIT tier's, exactly: the translation unit under its name, the unit's headers in memory
under the names the bundle gives them (header_bundle.py, from what nvcc read), the unit's options and no
include directory of the build machine, in an empty working directory. So a unit whose JIT would not
find a header (or would read it differently) fails here, at build time, naming the unit and carrying
NVRTC's log, instead of on a GPU the binary was not built for (docs/DESIGN.md, "Headers in memory").
The headers it checked are what the catalog bundles (header_bundle.write_unit_list).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import difflib
import os
import re
import tempfile
from pathlib import Path

import cuda_toolkit
import errors
import header_bundle
import names_cache
import render
import unit_source


# Options kiln gives NVRTC and never nvcc, at build time and at run time (runtime/src/jit_compile.cpp):
# -default-device makes functions without an execution space __device__ instead of rejecting them, as
# nvcc accepts them in host-side declarations that device code never calls (CUB's tuning headers).
NVRTC_ONLY_OPTIONS = ("-default-device",)
# Where NVRTC's log places an error in a name expression (nvrtcAddNameExpression): a file it makes up.
NAME_MAP = "__nv_name_map("


class NameExpressionError(errors.GenError):
    """A name expression of the unit's `kernels` names nothing NVRTC can instantiate: the table's mistake,
    which nvcc's failure on the same unit repeats (table_build reports it once). `summary`: the message
    without NVRTC's log."""

    def __init__(self, message: str, summary: str = ""):
        super().__init__(message)
        self.summary = summary or message


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
                options: list[str], headers: list[tuple[str, bytes]] = ()) -> dict[str, str]:
    """{expression: lowered name} for every expression, or LoweringError carrying NVRTC's log. `headers`:
    (name, bytes) NVRTC finds in memory, as the JIT tier hands them over. An expression may name a probe
    of SIGNATURE_PROBE (signature_expression): its lowered name spells the kernel's type."""
    nvrtc = _Nvrtc(nvrtc_library)
    lib = nvrtc.lib
    prog = ctypes.c_void_p()
    count = len(headers)
    contents = (ctypes.c_char_p * max(count, 1))(*(data for _, data in headers))
    names = (ctypes.c_char_p * max(count, 1))(*(name.encode() for name, _ in headers))
    nvrtc.call("nvrtcCreateProgram", ctypes.byref(prog), source.encode(), source_name.encode(), count,
               contents if count else None, names if count else None)
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
        lowered = {}
        for e in expressions:
            out = ctypes.c_char_p()
            rc = lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(out))
            if rc != 0 or not out.value:
                raise LoweringError(f"name expression {e!r} does not name a __global__ function NVRTC can "
                                    f"instantiate ({lib.nvrtcGetErrorString(rc).decode()})", log_text)
            lowered[e] = out.value.decode()
        return lowered
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@contextlib.contextmanager
def empty_directory():
    """Run in an empty working directory: NVRTC looks for a quoted #include beside its source, whose name
    has no directory, so in the working directory; the JIT's is the user's program's, never the build's."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="kiln-lower-") as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(here)


# Appended to the source at build time only: a kernel template whose lowered name, for a kernel's type as
# its template argument, spells that type in the Itanium mangling, which the C++ runtime demangles. So the
# same front-end run that names the kernels gives their parameter types, for the typed handles of the
# catalog header (docs/tiers.md, "The registry").
SIGNATURE_PROBE = """
#ifdef __CUDACC_RTC__
template <typename F> struct kiln_signature_tag_ {};
template <typename F> __global__ void kiln_signature_(kiln_signature_tag_<F>) {}
#endif
"""


def signature_expression(expression: str) -> str:
    return f"kiln_signature_<decltype({expression})>"


def demangle(symbol: str) -> str | None:
    """What the C++ runtime (libstdc++'s __cxa_demangle) makes of a mangled name, or None."""
    try:
        cxx = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    cxx.__cxa_demangle.restype = ctypes.c_void_p
    cxx.__cxa_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    libc.free.argtypes = [ctypes.c_void_p]
    status = ctypes.c_int()
    text = cxx.__cxa_demangle(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not text:
        return None
    try:
        return ctypes.string_at(text).decode()
    finally:
        libc.free(text)


def kernel_type(probe_symbol: str) -> str | None:
    """`void(float const*, int)` from the probe's lowered name, or None."""
    text = demangle(probe_symbol)
    head = "kiln_signature_<"
    if text is None or head not in text:
        return None
    start, depth = text.index(head) + len(head), 1
    for i in range(start, len(text)):
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        if depth == 0:
            kind = text[start:i].strip()
            return kind.replace("void (", "void(", 1) if kind.startswith("void (") else None
    return None


def lower_with_types(nvrtc: str, text: str, source_name: str, expressions: list[str], options: list[str],
                     headers, retry_without_probe: bool = True) -> tuple[dict[str, str], dict[str, str | None]]:
    """({expression: lowered name}, {expression: kernel type or None}) from one NVRTC run with the probe.
    Should the probe itself fail (an expression decltype cannot take), the unit is named without it
    (a second run, only then, and only with `retry_without_probe`; else the LoweringError is raised) and
    its kernels get no type."""
    probes = {e: signature_expression(e) for e in expressions}
    try:
        lowered = lower_names(nvrtc, text + SIGNATURE_PROBE, source_name, [*expressions, *probes.values()], options, headers)
    except LoweringError:
        if not retry_without_probe:
            raise
        return lower_names(nvrtc, text, source_name, expressions, options, headers), dict.fromkeys(expressions)
    return ({e: lowered[e] for e in expressions}, {e: kernel_type(lowered[p]) for e, p in probes.items()})


def lower_unit(desc: dict, source: Path, nvrtc: str, cuda_root: Path, output: Path, listed: Path,
               unit_list: Path, types: Path | None = None, cache: names_cache.NamesCache | None = None) -> None:
    """Write {name expression: mangled name} for a unit's kernels to `output` (and {name expression: the
    kernel's type, or null} to `types`), from NVRTC compiling the
    unit as the JIT tier will: with the headers nvcc read (`listed`, the compile step's list) in memory,
    named as the bundle names them, and no include directory. Writes those headers to `unit_list` for
    the catalog. Without `listed` (nvcc failed, so the unit fails anyway), NVRTC reads the build's include
    directories instead, only to say whether a name expression is at fault."""
    options = lowering_options(desc)
    expressions = [k["expression"] for k in desc["kernels"]]
    text = source.read_text(encoding="utf-8")
    if not listed.is_file():
        # nvcc failed, and said why: NVRTC speaks only when a name expression is at fault, which it says
        # best (an error of the source itself would be the same error twice).
        options += [*(f"-I{d}" for d in desc["include_dirs"]), *(f"-I{d}" for d in cuda_toolkit.include_dirs(cuda_root))]
        try:
            lower_names(str(nvrtc), text, source.name, expressions, options)
        except LoweringError as e:
            if str(e).startswith("name expression") or NAME_MAP in e.log:
                raise name_expression_error(desc, text, e) from None
        return
    read, headers = listed_headers(desc, source, listed, cuda_root)
    key = cache.key(text, source.name, expressions, options, headers) if cache else ""
    try:
        if (found := cache.load(key, expressions) if cache else None) is not None:
            names, kinds = found
        else:
            with empty_directory():
                names, kinds = lower_with_types(str(nvrtc), text, source.name, expressions, options, headers)
            if cache:
                cache.store(key, names, kinds)
    except LoweringError as e:
        if str(e).startswith("name expression") or NAME_MAP in e.log:  # NVRTC's errors in a name expression
            raise name_expression_error(desc, text, e) from None
        raise errors.GenError(
            f"{desc['where']}: nvcc compiled this unit, but the JIT tier could not: {e} with the {len(headers)} "
            f"headers bundled for it in memory and no include directory, as the JIT runs it. A header NVRTC "
            f"cannot open was not read by nvcc for this unit (an #include under #ifdef __CUDACC_RTC__, an "
            f"#include_next) or is included by a name no include directory gives it.\n{unit_source.log_with_paths(desc, e.log)}") from None
    header_bundle.write_unit_list(unit_list, headers, read)
    write_lowered([k["expression"] for k in desc["kernels"]], names, kinds, output, types)


GLOBAL = re.compile(r"\b__global__\b")
# What may stand between __global__ and a kernel's name with parentheses of its own.
KERNEL_ATTRIBUTE = re.compile(r"\b(?:__launch_bounds__|__maxnreg__|__cluster_dims__|__attribute__|alignas)\s*"
                              r"\((?:[^()]|\([^()]*\))*\)")
NAME_BEFORE_PARENTHESIS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
EXPRESSION_NAME = re.compile(r"\s*&?\s*(?:::\s*)?((?:[A-Za-z_][A-Za-z0-9_]*\s*::\s*)*[A-Za-z_][A-Za-z0-9_]*)")

# An error NVRTC's log places in a file (the unit, a header), not in its name expressions.
SOURCE_ERROR = re.compile(r"^(?!__nv_name_map\()\S[^\n]*\([0-9]+\): (?:catastrophic )?error\b", re.M)


def defined_kernels(text: str) -> list[str]:
    """The names of the __global__ functions a translation unit declares (read from its text, not
    compiled), in order, each once."""
    names = []
    for m in GLOBAL.finditer(text):
        declaration = KERNEL_ATTRIBUTE.sub(" ", text[m.end():m.end() + 1000])
        if (name := NAME_BEFORE_PARENTHESIS.search(declaration)) is not None:
            names.append(name.group(1))
    return list(dict.fromkeys(names))


def unknown_names(desc: dict, text: str) -> list[str]:
    """For each kernel whose name expression starts with a name no kernel of the source has: one line
    saying so, with the source's kernels closest to it (difflib)."""
    defined = defined_kernels(text)
    lines = []
    for k in desc["kernels"]:
        m = EXPRESSION_NAME.match(k["expression"])
        if m is None:
            continue
        name = re.split(r"\s*::\s*", m.group(1))[-1]
        if name in defined:
            continue
        close = difflib.get_close_matches(name, defined, n=3)
        hint = (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else
                f" (its kernels: {', '.join(defined)})" if defined else " (it declares no __global__ function)")
        kernel = f"kernel '{k['name']}'" + (f" = {k['expression']!r}" if k["expression"] != k["name"] else "")
        lines.append(f"{kernel}: the source defines no kernel named '{name}'{hint}")
    return lines


def name_expression_error(desc: dict, text: str, e: LoweringError) -> NameExpressionError:
    """The unit's field 'kernels' is at fault: which name the source lacks (and what is close to it), and
    NVRTC's log when it says more than that (an error of the source itself, a wrong template argument)."""
    where = f"{desc['where']}: field 'kernels'"
    unknown = unknown_names(desc, text)
    errors_elsewhere = SOURCE_ERROR.search(e.log) is not None
    log = f"\n{unit_source.log_with_paths(desc, e.log)}" if errors_elsewhere or not unknown else ""
    if unknown:
        summary = "\n".join(f"{where}: {line}" for line in unknown)
    elif str(e).startswith("name expression"):
        summary = f"{where}: {e}"
    else:
        summary = f"{where}: a name expression names no kernel the source can instantiate ({e})"
    return NameExpressionError(summary + log, summary)


def write_lowered(expressions: list[str], names: dict[str, str], kinds: dict[str, str | None], output: Path,
                  types: Path | None) -> None:
    """A unit's {name expression: mangled name} to `output` and {name expression: kernel type or null} to
    `types` (if given), for its own expressions, sorted."""
    render.write_json(output, {e: names[e] for e in sorted(expressions)})
    if types is not None:
        render.write_json(types, {e: kinds[e] for e in sorted(expressions)})


def listed_headers(desc: dict, source: Path, listed: Path, cuda_root: Path) -> tuple[list[str], list[tuple[str, bytes]]]:
    """The headers nvcc read for the unit (`listed`, its compile or scan step's list), and the bundle NVRTC
    gets of them in memory: (name, bytes) as the JIT tier will name them."""
    read = render.read_json(listed)["headers"]
    unit = header_bundle.UnitInput(source, desc["include_dirs"], read)
    return read, header_bundle.unit_headers(unit, header_bundle.unit_roots(unit, cuda_root), desc["where"])


def lowering_options(desc: dict) -> list[str]:
    return [*desc["options"], f"-arch=compute_{desc['lower_arch']}", *NVRTC_ONLY_OPTIONS, "-fdevice-syntax-only"]


# The block unit.cu.j2 ends a generated unit with: nvcc's references to the kernels, which NVRTC skips.
NVCC_ONLY = re.compile(r"\n#ifndef __CUDACC_RTC__\n((?:[^\n]*\n)*?)#endif\n*\Z")
IF = re.compile(r"^[ \t]*#[ \t]*if", re.M)
LINE_COMMENT = re.compile(r"^[ \t]*//.*$", re.M)


def nvrtc_view(text: str) -> str:
    """A unit's text as far as its names go: without the nvcc-only block at its end and without the lines
    that are comments alone (a generated unit's first names the unit). Units with the same view, options
    and headers lower their name expressions alike, so one NVRTC run names them all (lower_group). A
    line that starts with // is a comment, or inside one, unless a raw string or a line continuation
    spans lines: such a text is its own view."""
    if m := NVCC_ONLY.search(text):
        if not IF.search(m.group(1)):
            text = text[:m.start() + 1]
    if 'R"' in text or "\\\n" in text:
        return text
    return "\n".join(line.rstrip() for line in LINE_COMMENT.sub("", text).splitlines() if line.strip())


def lower_group(units: list[tuple[dict, Path, Path, Path, Path, Path | None]], nvrtc: str,
                cuda_root: Path, cache: names_cache.NamesCache | None = None) -> dict[str, str | errors.GenError]:
    """lower_unit for units (each: its arguments after nvrtc and cuda_root) of the same nvrtc_view,
    options, include directories and headers read (table_build groups them): one NVRTC run holds every
    unit's name expressions and probes, and each unit's files are written as lower_unit writes them.
    Should that run fail, each unit is lowered on its own, for its own error. {unit: "" or the GenError}."""
    desc, source, _, listed, _, _ = units[0]
    expressions = list(dict.fromkeys(k["expression"] for d, *_ in units for k in d["kernels"]))
    try:
        read, headers = listed_headers(desc, source, listed, cuda_root)
        # Each unit's entry is its own (its text, name and expressions), so that a build grouping the
        # units otherwise (a table's linked rows alone) finds them.
        own = [(d, s, [k["expression"] for k in d["kernels"]]) for d, s, *_ in units]
        keys = [cache.key(s.read_text(encoding="utf-8"), s.name, e, lowering_options(d), headers) for d, s, e in own] if cache else []
        found = [cache.load(key, e) for key, (_, _, e) in zip(keys, own)]
        if keys and all(f is not None for f in found):
            names = {e: n for f in found for e, n in f[0].items()}
            kinds = {e: k for f in found for e, k in f[1].items()}
        else:
            text = source.read_text(encoding="utf-8")  # before the working directory changes: `source` may be relative
            with empty_directory():
                names, kinds = lower_with_types(str(nvrtc), text, source.name, expressions,
                                                lowering_options(desc), headers, retry_without_probe=False)
            for key, (_, _, e) in zip(keys, own):
                cache.store(key, {x: names[x] for x in e}, {x: kinds[x] for x in e})
    except (OSError, ValueError, LoweringError, errors.GenError):
        out: dict[str, str | errors.GenError] = {}
        for args in units:
            try:
                lower_unit(args[0], args[1], nvrtc, cuda_root, *args[2:], cache=cache)
                out[args[0]["unit"]] = ""
            except errors.GenError as e:
                out[args[0]["unit"]] = e
        return out
    header_bundle.write_unit_lists([unit_list for *_, unit_list, _ in units], headers, read)
    for d, _, output, _, _, types in units:
        write_lowered([k["expression"] for k in d["kernels"]], names, kinds, output, types)
    return {d["unit"]: "" for d, *_ in units}
