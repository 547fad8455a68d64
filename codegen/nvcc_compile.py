"""The build's compile step: nvcc compiles a unit's translation unit for one target (compute_XX -> PTX;
lto_XX -> LTO-IR; sm_XX -> a lean cubin: PTX, kiln-ptx-strip, then nvcc assembles it), and records the
headers it read and the unit's digest, on which the disk cache's key and table_build's stamps are built."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import errors
import ptx_globals
import render
import spec as specmod
import unit_source


@dataclass(frozen=True)
class TargetFiles:
    """What compiling one target writes: the binary, the headers it read (with the unit's digest), a depfile."""
    output: Path
    headers: Path
    depfile: Path


def compile_target(desc: dict, target: str, nvcc: str, source: Path, output: Path, headers: Path,
                   depfile: Path, ptx_strip: str, ptx_too: TargetFiles | None = None) -> str:
    """nvcc `source` for one target, writing a depfile and, in `headers`, the headers it included with
    the unit's digest. A compute_XX target is nvcc's PTX; an lto_XX target, a linked unit's LTO-IR. An
    sm_XX cubin is assembled from the unit's compute_XX PTX after `ptx_strip` (kiln-ptx-strip) dropped the module-scope globals nothing uses:
    CCCL leaves dozens in every unit that includes it, and each costs the driver work at every load, so
    an embedded cubin is then as lean as the JIT's (docs/DESIGN.md, "Lean cubins"). The code is the
    same: ptxas assembles the same kernels.
    `ptx_too`: the unit's compute_XX target of the same arch, whose PTX is the one this cubin is assembled
    from (the same nvcc command): kept as that target's output instead of compiled a second time.
    Returns what nvcc printed (warnings) for the build to show or count."""
    arch, kind = specmod.parse_target(target)
    options = unit_source.compiler_options(desc)
    if kind == "lto":
        # A linked unit's kernels as LTO-IR: nvJitLink links them with the code given at run time.
        warnings = run_nvcc(desc, target, nvcc, ["-ltoir", "-dlto", f"-arch=lto_{arch}", *options, "-MD", "-MF",
                                                 str(depfile), "-o", str(output), str(source)])
        record_headers(desc, source, depfile, output, headers)
        return warnings
    is_ptx = kind == "compute"
    ptx = output if is_ptx else output.with_name(output.name + ".full.ptx")
    warnings = run_nvcc(desc, target, nvcc, ["-ptx", f"-arch=compute_{arch}", *options, "-MD", "-MF", str(depfile),
                                             "-o", str(ptx), str(source)])
    splittable = is_ptx and unit_splittable(desc, ptx)
    if not is_ptx:
        lean = output.with_name(output.name + ".lean.ptx")
        try:
            warnings += run_tool(desc, target, [ptx_strip, str(ptx), str(lean)])
            splittable = unit_splittable(desc, lean)
            # The unit's options again: those ptxas takes (-Xptxas, -maxrregcount, -lineinfo) apply here.
            warnings += run_nvcc(desc, target, nvcc, ["-cubin", f"-arch=sm_{arch}", *options, "-o", str(output), str(lean)])
            if ptx_too is not None:
                os.replace(ptx, ptx_too.output)
        finally:
            ptx.unlink(missing_ok=True)
            lean.unlink(missing_ok=True)
    read = record_headers(desc, source, depfile, output, headers, splittable)
    if ptx_too is not None:
        render.write_depfile(ptx_too.depfile, ptx_too.output, read)
        render.write_json(ptx_too.headers, render.read_json(headers))
    return warnings


def list_headers(desc: dict, nvcc: str, source: Path, headers: Path, depfile: Path) -> str:
    """For a JIT-only unit (no binaries): what compile_target records in `headers`, from nvcc's
    preprocessor alone (-M, at the architecture the unit is named for), so the catalog bundles the
    headers the JIT needs and the unit has a digest. Returns nvcc's warnings."""
    arguments = ["-M", f"-arch=compute_{desc['lower_arch']}", *unit_source.compiler_options(desc), "-o", str(depfile),
                 str(source)]
    warnings = run_nvcc(desc, "its headers (jit_only)", nvcc, arguments)
    record_headers(desc, source, depfile, headers, headers)
    return warnings


# A preprocessor directive other than #line: with the options, include directories and architecture, what
# decides which headers the preprocessor reads (the rest of a unit is text it only passes on).
DIRECTIVE = re.compile(r"^[ \t]*#(?![ \t]*line\b).*$", re.M)


def scan_key(desc: dict, source: Path, text: str) -> str:
    """JIT-only units with the same key read the same headers, so one nvcc -M lists them for all: the same
    directives (#line aside: it names a file, it does not open one), options, include directories,
    architecture, and the same directory (where a quoted #include looks first)."""
    h = hashlib.sha256(b"kiln scan key 1\0")
    h.update(json.dumps([unit_source.compiler_options(desc), desc["include_dirs"], desc["lower_arch"],
                         str(source.resolve().parent), DIRECTIVE.findall(text)]).encode())
    return h.hexdigest()


def list_headers_group(units: list[tuple[dict, Path, Path, Path]], nvcc: str) -> dict[str, str | errors.GenError]:
    """list_headers for JIT-only units of one scan_key (each: desc, source, headers, depfile): nvcc's
    preprocessor runs for the first, and each unit gets that list with its own digest and depfile.
    Returns {unit: warnings or the GenError}: the run's warnings are the first unit's alone (the others
    share them; told once, not once per unit). Should the first scan fail, every other unit is scanned on
    its own, so that each error is its own unit's."""
    desc, source, headers, depfile = units[0]
    try:
        warnings = list_headers(desc, nvcc, source, headers, depfile)
    except errors.GenError as e:
        out: dict[str, str | errors.GenError] = {desc["unit"]: e}
        for d, s, h, f in units[1:]:
            try:
                out[d["unit"]] = list_headers(d, nvcc, s, h, f)
            except errors.GenError as e2:
                out[d["unit"]] = e2
        return out
    included = render.read_json(headers)["headers"]
    hashes: dict[str, bytes] = {}
    out = {desc["unit"]: warnings}
    for d, s, h, f in units[1:]:
        render.write_depfile(f, h, [str(s), *included])
        render.write_json(h, {"digest": unit_digest(d, s.read_bytes(), included, hashes), "headers": included})
        out[d["unit"]] = ""
    return out


def record_headers(desc: dict, source: Path, depfile: Path, target: Path, headers: Path,
                   splittable: bool = False) -> list[str]:
    """The headers nvcc's depfile lists (the depfile rewritten for `target`), the unit's digest, and
    whether its kernels may be split over modules (unit_splittable). Returns the depfile's prerequisites."""
    read = resolve_depfile(depfile, target, desc["include_dirs"])
    included = [h for h in read if Path(h).resolve() != source.resolve()]
    digest = unit_digest(desc, source.read_bytes(), included)
    render.write_json(headers, {"digest": digest, "headers": included, "splittable": splittable})
    return read


def unit_splittable(desc: dict, ptx: Path) -> bool:
    """Whether the JIT may compile the unit's kernels in parts, each loaded as a module of its own: at
    least two kernels, and PTX (`ptx`, the unit's as the cubin is assembled from it) that writes no
    module-scope variable (ptx_globals.py). The catalog records it per unit."""
    return len(desc["kernels"]) >= 2 and ptx_globals.splittable(ptx.read_text(encoding="utf-8", errors="replace"))


def run_nvcc(desc: dict, target: str, nvcc: str, arguments: list[str]) -> str:
    # No shell here (an argument list), but nvcc runs its own stages through sh: the last check that
    # nothing it is handed would run there or mean something else than to NVRTC (spec.nvcc_unsafe).
    options = set(unit_source.compiler_options(desc))
    for argument in arguments:
        if why := specmod.nvcc_unsafe(argument, split_at_commas=argument in options):
            raise errors.GenError(f"{desc['where']}: not running nvcc for {target} with the argument {argument!r}: "
                                  f"{why}; rename the path or change the option")
    return run_tool(desc, target, [str(nvcc), *arguments])


def run_tool(desc: dict, target: str, cmd: list[str]) -> str:
    """Runs a compile step; a failure raises GenError naming the unit, with the command and its output.
    Returns what a successful step printed (warnings), with the files the unit's #line directives name
    given as paths, for the build to show or count (table_build.py)."""
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    name = Path(cmd[0]).name
    output = unit_source.log_with_paths(desc, result.stdout)
    if result.returncode != 0:
        raise errors.GenError(f"{desc['where']}: {name} failed for {target} (exit {result.returncode})\n"
                              f"command: {' '.join(cmd)}\n{output}{include_hint(desc, output)}")
    return output if output.strip() else ""


# How nvcc says an #include found no file: its front end, and the gcc preprocessor it runs first.
MISSING_INCLUDE = re.compile(r'cannot open source file "([^"\n]+)"|fatal error: ([^:\n]+): No such file or directory')


def include_hint(desc: dict, log: str) -> str:
    """For a log where an #include found no file: one line saying where nvcc looked and which field of the
    table adds a directory; else ""."""
    m = MISSING_INCLUDE.search(log)
    if m is None:
        return ""
    header = m.group(1) or m.group(2)
    searched = ", ".join(desc["include_dirs"]) or "no directory"
    return (f"hint: nvcc looked for '{header}' in {searched} and the toolkit's headers; add the directory it "
            f"is in to the table's `include_dirs` (under [registry], relative to the table)\n")
def resolve_depfile(path: Path, target: Path, include_dirs: list[str]) -> list[str]:
    """The depfile's prerequisites as existing paths, and the depfile rewritten with them. nvcc also
    lists the name a `#line` directive gives (the hand-written source, relative to its own directory):
    left as it is, ninja would look for it in the build directory and rebuild forever."""
    resolved = []
    for dep in render.depfile_inputs(path):
        candidates = [Path(dep)] + ([Path(d) / dep for d in include_dirs] if not Path(dep).is_absolute() else [])
        found = next((c for c in candidates if c.is_file()), None)
        if found is not None:
            resolved.append(str(found))
    render.write_depfile(path, target, resolved)
    return resolved


def unit_digest(desc: dict, source: bytes, headers: list[str], hashes: dict[str, bytes] | None = None) -> str:
    """SHA-256 over what decides a unit's binaries: its translation unit, the contents of every header it
    includes (not their paths, so the digest does not depend on where the toolkit is installed), its name
    expressions and options. The disk cache's key is built on it. `hashes` ({path: SHA-256}) keeps each
    header's hash for the caller's next units: one build's units include the same ~1000 headers."""
    hashes = {} if hashes is None else hashes
    for p in headers:
        if p not in hashes:
            hashes[p] = hashlib.sha256(Path(p).read_bytes()).digest()
    h = hashlib.sha256(b"kiln unit digest 1\0")
    h.update(hashlib.sha256(source).digest())
    for content_hash in sorted(hashes[p] for p in headers):
        h.update(content_hash)
    h.update(json.dumps([desc["kernels"], desc["options"]], sort_keys=True).encode())
    return h.hexdigest()
