"""`kiln-gen build`: every step (source, compile per target, lower, fatbins, catalog) for a whole spec table in one
command, so a build system needs one rule per table. Only units whose inputs changed since the last run
are recompiled (a stamp per unit); they compile in a pool of worker processes, since NVRTC does not
scale with threads (docs/facts.md, "Compilers: NVRTC, nvJitLink and CuPy")."""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import re
from dataclasses import dataclass
from pathlib import Path

import catalog
import cuda_toolkit
import errors
import fatbin
import lowering
import names_cache
import nvcc_compile
import progress
import render
import spec as specmod
import unit_source

# Bump when what a stamp records changes meaning: every unit is then rebuilt once.
STAMP_VERSION = 1


@dataclass(frozen=True)
class UnitWork:
    """One unit in the private work directory: its description and its files."""
    unit: specmod.Unit
    desc: dict
    files: unit_source.UnitFiles

    def outputs(self) -> list[Path]:
        """What compiling and lowering the unit write."""
        targets = self.desc["targets"]
        return [*map(self.files.binary, targets), *map(self.files.headers, targets), self.files.listed(targets),
                self.files.names, self.files.types, self.files.bundle, *self.files.fatbins(targets)]


def work_dir(outdir: Path, registry: str) -> Path:
    return outdir / f"{registry}.kiln"


def build(spec: specmod.Spec, toolkit: cuda_toolkit.Toolkit, ptx_strip: str, outdir: Path,
          depfile: Path | None = None, jobs: int = 1, report: "progress.Report | None" = None,
          names: "names_cache.NamesCache | None" = None) -> list[str]:
    """Bring the catalog of `spec` in `outdir` up to date; returns the names of the units recompiled.
    `ptx_strip` is kiln-ptx-strip (nvcc_compile.compile_target); `report` hears of each step done and of
    the compilers' warnings (none: nothing is shown); `names`, where the lower step's results are kept
    for other builds (none: each stale unit's names come from NVRTC). Raises GenError naming every unit
    that failed (the others are kept, and not rebuilt next time)."""
    report = report or progress.Report()
    work = work_dir(outdir, spec.name)
    work.mkdir(parents=True, exist_ok=True)
    strip = Path(ptx_strip)
    inputs_common = {"version": STAMP_VERSION, "toolkit": toolkit.identity(), "codegen": codegen_identity(),
                     "ptx_strip": [str(strip), strip.stat().st_size, strip.stat().st_mtime_ns]}
    units, stale = [], []
    hashes: dict[str, bytes] = {}  # each header's SHA-256, once for the table's ~1000 headers, not once per unit
    for unit in spec.units:
        files = unit_source.write_source(spec, unit, work)
        w = UnitWork(unit, render.read_json(files.description), files)
        units.append(w)
        if not is_fresh(w, stamp_inputs(w, inputs_common), hashes):
            stale.append(w)

    failures = compile_units(stale, toolkit, ptx_strip, jobs, report, spec.path.resolve(), names)
    for w in stale:
        if w.unit.name not in failures:
            write_stamp(w, stamp_inputs(w, inputs_common), hashes)
    if failures:
        raise errors.GenError("\n\n".join(m for w in stale for m in failures.get(w.unit.name, {}).values()))

    outputs = catalog.outputs(outdir, spec.name)
    catalog.write_catalog(spec, work, toolkit.root, outputs)
    deps = dependencies(spec, units, toolkit)
    if depfile is not None:
        render.write_depfile(depfile, outputs["hpp"], deps)
    # Outputs whose text did not change keep their timestamps, older than an edited input: the build
    # system must not rerun this command for that alone. Meson's custom_target gives ninja `restat = 1`,
    # which records the run in its log instead (docs/DESIGN.md, "Incremental builds").
    return [w.unit.name for w in stale]


# -- which units to rebuild ---------------------------------------------------------------------------

def codegen_identity() -> str:
    """A change to the generator may change how units compile: it rebuilds them all."""
    h = hashlib.sha256()
    for p in render.CODEGEN_FILES:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def stamp_inputs(w: UnitWork, common: dict) -> dict:
    # `where` names the table as the caller spelled its path, `paths` where its files lie, `hoisted` which
    # lines logs cite in the source: not inputs of the binaries.
    return dict(common, description={k: v for k, v in w.desc.items() if k not in ("where", "paths", "hoisted")})


def is_fresh(w: UnitWork, inputs: dict, hashes: dict[str, bytes] | None = None) -> bool:
    """True when the unit's outputs exist and were built from the same translation unit, description,
    compilers and header contents (the digest the compile step computes, over the headers it listed)."""
    try:
        stamp = render.read_json(w.files.stamp)
        if stamp["inputs"] != inputs or not all(p.is_file() for p in w.outputs()):
            return False
        return nvcc_compile.unit_digest(w.desc, w.files.source.read_bytes(), stamp["headers"], hashes) == stamp["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no stamp, an unreadable one, or a header that went away


def write_stamp(w: UnitWork, inputs: dict, hashes: dict[str, bytes] | None = None) -> None:
    headers = stamped_headers(w)
    stamp = {"inputs": inputs, "headers": headers,
             "digest": nvcc_compile.unit_digest(w.desc, w.files.source.read_bytes(), headers, hashes)}
    render.write_json(w.files.stamp, stamp)


def stamped_headers(w: UnitWork) -> list[str]:
    """Every header the unit's compiles included, over all its targets."""
    headers: set[str] = set()
    for listed in [*map(w.files.headers, w.desc["targets"]), w.files.listed(w.desc["targets"])]:
        headers.update(render.read_json(listed)["headers"])
    return sorted(headers)


# -- compiling ----------------------------------------------------------------------------------------

def compile_units(stale: list[UnitWork], toolkit: cuda_toolkit.Toolkit, ptx_strip: str, jobs: int,
                  report: "progress.Report", table: Path | None = None,
                  names: "names_cache.NamesCache | None" = None) -> dict[str, dict]:
    """Compile every target and lower the names of each stale unit, then pack each unit whose targets all
    compiled into its fatbins. Returns the failures as {unit: {step: message}}: a unit's first failed
    compile (the other targets' logs say the same), its failed lowering (NVRTC's view, which names the
    field when a name expression is wrong) and a failed packing. A name expression at fault is reported
    once: when every error nvcc gave is in the unit's references to its kernels (placed in `table`, the
    spec table, at the row's `kernels`), as the lowering's words (which name, and what is close to it)
    with nvcc's log, which cites the table's line; NVRTC's log would say the same again.

    A unit's lowering runs once its first target compiled (or, for a JIT-only unit, once nvcc's
    preprocessor listed its headers): it compiles the unit as the JIT will, from the headers that compile
    read (lowering.py). Its fatbins are packed once every target compiled.

    JIT-only units share their compiler runs where the result is the same for all (a primitives table has
    81 in 7 such groups; one unit's runs took 2 s of nvcc -M and 3 s of NVRTC on one core): one nvcc -M
    lists the headers of units with the same directives (nvcc_compile.scan_key), and one NVRTC run names
    the kernels of those among them whose text NVRTC reads alike (lowering.lower_group).

    A task is (units, step, arguments); a step over several units returns {unit: outcome}."""
    first, later = [], []  # tasks that can start now; lowering waits for its units' first step
    pending: dict[str, int] = {}  # compile steps of each unit not ended yet: packing waits for none
    scans: dict[str, list[UnitWork]] = {}
    for w in stale:
        w.files.stamp.unlink(missing_ok=True)  # an interrupted build must not look finished
        targets = w.desc["targets"]
        w.files.listed(targets).unlink(missing_ok=True)  # lowering must not read an earlier build's list
        if not targets:  # JIT-only: no binary, only the headers the JIT needs, from nvcc's preprocessor
            key = nvcc_compile.scan_key(w.desc, w.files.source, w.files.source.read_text(encoding="utf-8"))
            scans.setdefault(key, []).append(w)
            continue
        steps = []
        for target in targets:
            arch, kind = specmod.parse_target(target)
            # A compute_XX target beside sm_XX: its PTX is the first step of that cubin, made once there.
            if kind == "compute" and f"sm_{arch}" in targets:
                continue
            also = f"compute_{arch}" if kind == "sm" and f"compute_{arch}" in targets else None
            ptx_too = nvcc_compile.TargetFiles(w.files.binary(also), w.files.headers(also),
                                               w.files.compile_depfile(also)) if also else None
            steps.append(([w], nvcc_compile.compile_target, (w.desc, target, str(toolkit.nvcc), w.files.source,
                                                             w.files.binary(target), w.files.headers(target),
                                                             w.files.compile_depfile(target), ptx_strip, ptx_too)))
        pending[w.unit.name] = len(steps)
        first.append(steps[0])
        later += steps[1:]
    for ws in scans.values():
        first.append((ws, nvcc_compile.list_headers_group,
                      ([(w.desc, w.files.source, w.files.jit_headers, w.files.jit_depfile) for w in ws], str(toolkit.nvcc))))
        if len(ws) > 1:
            report.shared("headers listed", [w.unit.name for w in ws])
    failures: dict[str, dict] = {}
    names_at_fault: dict[str, lowering.NameExpressionError] = {}  # units whose lowering blamed a name expression
    # Each unit's steps: its first compile or scan, its other targets, its lowering, its packing.
    report.start(len(stale) + len(later) + len(stale) + len(pending))

    def lowering_files(w: UnitWork) -> tuple:
        """lower_unit's arguments after NVRTC and the toolkit: what it reads and writes."""
        return (w.files.names, w.files.listed(w.desc["targets"]), w.files.bundle, w.files.types)

    def lowering_of(ws: list[UnitWork]) -> list:
        """The lowering tasks of units whose first step ended: one per unit, but one for the JIT-only
        units of a scan whose text NVRTC reads alike (the scan made them share options and headers)."""
        alike: dict[tuple[str, str], list[UnitWork]] = {}
        for w in ws:
            shared = not w.desc["targets"] and not failures.get(w.unit.name)
            key = ("view", lowering.nvrtc_view(w.files.source.read_text(encoding="utf-8"))) if shared else ("unit", w.unit.name)
            alike.setdefault(key, []).append(w)
        tasks = []
        for group in alike.values():
            if len(group) == 1:
                w = group[0]
                tasks.append(([w], lowering.lower_unit, (w.desc, w.files.source, str(toolkit.nvrtc), toolkit.root,
                                                         *lowering_files(w), names)))
            else:
                report.shared("names lowered", [w.unit.name for w in group])
                tasks.append((group, lowering.lower_group, ([(w.desc, w.files.source, *lowering_files(w)) for w in group],
                                                            str(toolkit.nvrtc), toolkit.root, names)))
        return tasks

    def finished(ws: list[UnitWork], step, outcome) -> list:
        """Records a task's end; returns the tasks it lets start."""
        outcomes = outcome if isinstance(outcome, dict) else {w.unit.name: outcome for w in ws}
        ready = []
        for w in ws:
            o = outcomes[w.unit.name]
            if isinstance(o, lowering.NameExpressionError):
                names_at_fault[w.unit.name] = o
            if isinstance(o, BaseException):
                message = (str(o) if isinstance(o, errors.GenError) else
                           f"{w.desc['where']}: a compile process died ({o}); the build can be rerun")
                failures.setdefault(w.unit.name, {}).setdefault(step.__name__, message)
            elif o:
                report.warnings(w.desc["where"], o)
            report.step(w.unit.name, not isinstance(o, BaseException))
            if step is not nvcc_compile.compile_target:
                continue
            pending[w.unit.name] -= 1
            if pending[w.unit.name]:
                continue
            if "compile_target" in failures.get(w.unit.name, {}):
                report.step(w.unit.name, False)  # its packing, which cannot run
                continue
            ready.append(([w], fatbin.build_unit, (w.desc, str(toolkit.fatbinary), w.files)))
        return ready

    if jobs == 1 or len(stale) <= 1:
        queue = [(task, True) for task in first] + [(task, False) for task in later]
        while queue:
            (ws, step, args), was_first = queue.pop(0)
            queue += [(task, False) for task in finished(ws, step, run_step(step, args))]
            if was_first:
                queue += [(task, False) for task in lowering_of(ws)]
        return reported(failures, names_at_fault, table)
    # spawn, not fork: the executor's own thread is running when it starts workers. As many tasks run as
    # there are processes, picked in this order: lowering or packing once the steps they need ended (so a
    # name or JIT error comes early), every first step, then the other targets.
    context = multiprocessing.get_context("spawn")
    ready: list = []
    first.reverse()
    later.reverse()
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(stale)), mp_context=context) as pool:
        running: dict = {}
        while True:
            while len(running) < jobs and (ready or first or later):
                queue = ready or first or later
                ws, step, args = queue.pop()
                try:
                    running[pool.submit(run_step, step, args)] = (ws, step, queue is first)
                except concurrent.futures.process.BrokenProcessPool as e:
                    ready += finished(ws, step, e)
                    if queue is first:
                        ready += lowering_of(ws)
            if not running:
                break
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                ws, step, was_first = running.pop(future)
                try:
                    outcome = future.result()
                except concurrent.futures.process.BrokenProcessPool as e:
                    outcome = e
                ready += finished(ws, step, outcome)
                if was_first:  # the units' headers are listed: their lowering can run
                    ready += lowering_of(ws)
    return reported(failures, names_at_fault, table)


# Where nvcc's log places an error: `file(line): error` (its front end), `file:line:col: fatal error` (gcc's
# preprocessor).
NVCC_ERROR = re.compile(r"^(\S[^\n]*?)(?:\([0-9]+\)|:[0-9]+:[0-9]+): (?:catastrophic |fatal )?error\b", re.M)


def reported(failures: dict[str, dict], names_at_fault: dict, table: Path | None) -> dict[str, dict]:
    """`failures` with one message per unit whose name expressions are at fault, where nvcc's errors are
    all in the table (the references to the kernels, whose #line names the row's `kernels`): the
    lowering's summary, then nvcc's log."""
    for unit, fault in names_at_fault.items():
        compiled = failures[unit].get("compile_target")
        if compiled is None or table is None:
            continue
        log = compiled.split("\n", 2)[-1]  # after the line naming the unit and the command's
        found = NVCC_ERROR.findall(log)
        if found and all(Path(f) == table for f in found):
            failures[unit] = {"lower_unit": f"{fault.summary}\n{log}"}
    return failures


def run_step(step, args):
    """A step's warnings (text, maybe empty), or the GenError it raised: returned, not raised, so that the
    parent tells one unit's failure from a dead worker."""
    try:
        return step(*args) or ""
    except errors.GenError as e:
        return e


# -- what ninja needs ---------------------------------------------------------------------------------

def dependencies(spec: specmod.Spec, units: list[UnitWork], toolkit: cuda_toolkit.Toolkit) -> list[Path]:
    """Every file the outputs are made from: table, sources, family templates, catalog templates, the
    generator, and every header a unit included."""
    deps = [spec.path.resolve()]
    for w in units:
        deps += unit_source.source_inputs(spec, w.unit)
        deps += map(Path, render.read_json(w.files.stamp)["headers"])
    deps += catalog.catalog_inputs(toolkit.root)
    return list(dict.fromkeys(deps))
