"""`kiln-gen build`: every step (source, compile per target, lower, fatbins, catalog) for a whole spec table in one
command, so a build system needs one rule per table. Only units whose inputs changed since the last run
are recompiled (a stamp per unit); they compile in a pool of worker processes, since NVRTC does not
scale with threads (DESIGN.md)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
from dataclasses import dataclass
from pathlib import Path

import catalog
import cuda_toolkit
import errors
import fatbin
import lowering
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
          depfile: Path | None = None, jobs: int = 1, report: "progress.Report | None" = None) -> list[str]:
    """Bring the catalog of `spec` in `outdir` up to date; returns the names of the units recompiled.
    `ptx_strip` is kiln-ptx-strip (nvcc_compile.compile_target); `report` hears of each step done and of
    the compilers' warnings (none: nothing is shown). Raises GenError naming every unit that failed (the
    others are kept, and not rebuilt next time)."""
    report = report or progress.Report()
    work = work_dir(outdir, spec.name)
    work.mkdir(parents=True, exist_ok=True)
    strip = Path(ptx_strip)
    inputs_common = {"version": STAMP_VERSION, "toolkit": toolkit.identity(), "codegen": codegen_identity(),
                     "ptx_strip": [str(strip), strip.stat().st_size, strip.stat().st_mtime_ns]}
    units, stale = [], []
    for unit in spec.units:
        files = unit_source.write_source(spec, unit, work)
        w = UnitWork(unit, render.read_json(files.description), files)
        units.append(w)
        if not is_fresh(w, stamp_inputs(w, inputs_common)):
            stale.append(w)

    failures = compile_units(stale, toolkit, ptx_strip, jobs, report)
    for w in stale:
        if w.unit.name not in failures:
            write_stamp(w, stamp_inputs(w, inputs_common))
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
    # `where` names the table as the caller spelled its path, `paths` where its files lie: not inputs of
    # the binaries.
    return dict(common, description={k: v for k, v in w.desc.items() if k not in ("where", "paths")})


def is_fresh(w: UnitWork, inputs: dict) -> bool:
    """True when the unit's outputs exist and were built from the same translation unit, description,
    compilers and header contents (the digest the compile step computes, over the headers it listed)."""
    try:
        stamp = render.read_json(w.files.stamp)
        if stamp["inputs"] != inputs or not all(p.is_file() for p in w.outputs()):
            return False
        return nvcc_compile.unit_digest(w.desc, w.files.source.read_bytes(), stamp["headers"]) == stamp["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no stamp, an unreadable one, or a header that went away


def write_stamp(w: UnitWork, inputs: dict) -> None:
    headers = stamped_headers(w)
    stamp = {"inputs": inputs, "headers": headers,
             "digest": nvcc_compile.unit_digest(w.desc, w.files.source.read_bytes(), headers)}
    render.write_json(w.files.stamp, stamp)


def stamped_headers(w: UnitWork) -> list[str]:
    """Every header the unit's compiles included, over all its targets."""
    headers: set[str] = set()
    for listed in [*map(w.files.headers, w.desc["targets"]), w.files.listed(w.desc["targets"])]:
        headers.update(render.read_json(listed)["headers"])
    return sorted(headers)


# -- compiling ----------------------------------------------------------------------------------------

def compile_units(stale: list[UnitWork], toolkit: cuda_toolkit.Toolkit, ptx_strip: str, jobs: int,
                  report: "progress.Report") -> dict[str, dict]:
    """Compile every target and lower the names of each stale unit, then pack each unit whose targets all
    compiled into its fatbins. Returns the failures as {unit: {step: message}}: a unit's first failed
    compile (the other targets' logs say the same), its failed lowering (NVRTC's view, which names the
    field when a name expression is wrong) and a failed packing.

    A unit's lowering runs once its first target compiled (or, for a JIT-only unit, once nvcc's
    preprocessor listed its headers): it compiles the unit as the JIT will, from the headers that compile
    read (lowering.py). Its fatbins are packed once every target compiled."""
    first, later = [], []  # steps that can start now; lowering waits for its unit's first step
    pending: dict[str, int] = {}  # compile steps of each unit not ended yet: packing waits for none
    for w in stale:
        w.files.stamp.unlink(missing_ok=True)  # an interrupted build must not look finished
        targets = w.desc["targets"]
        w.files.listed(targets).unlink(missing_ok=True)  # lowering must not read an earlier build's list
        steps = []
        for target in targets:
            arch, kind = specmod.parse_target(target)
            # A compute_XX target beside sm_XX: its PTX is the first step of that cubin, made once there.
            if kind == "compute" and f"sm_{arch}" in targets:
                continue
            also = f"compute_{arch}" if kind == "sm" and f"compute_{arch}" in targets else None
            ptx_too = nvcc_compile.TargetFiles(w.files.binary(also), w.files.headers(also),
                                               w.files.compile_depfile(also)) if also else None
            steps.append((w, nvcc_compile.compile_target, (w.desc, target, str(toolkit.nvcc), w.files.source,
                                                           w.files.binary(target), w.files.headers(target),
                                                           w.files.compile_depfile(target), ptx_strip, ptx_too)))
        if not targets:  # JIT-only: no binary, only the headers the JIT needs, from nvcc's preprocessor
            steps = [(w, nvcc_compile.list_headers, (w.desc, str(toolkit.nvcc), w.files.source, w.files.jit_headers,
                                                     w.files.jit_depfile))]
        else:
            pending[w.unit.name] = len(steps)
        first.append(steps[0])
        later += steps[1:]
    lower = {w.unit.name: (w, lowering.lower_unit, (w.desc, w.files.source, str(toolkit.nvrtc), toolkit.root,
                                                     w.files.names, w.files.listed(w.desc["targets"]), w.files.bundle,
                                                     w.files.types))
             for w in stale}
    failures: dict[str, dict] = {}
    report.start(len(first) + len(later) + len(lower) + len(pending))

    def finished(w: UnitWork, step, outcome) -> list:
        """Records a step's end; returns the steps it lets start."""
        if isinstance(outcome, BaseException):
            message = (str(outcome) if isinstance(outcome, errors.GenError) else
                       f"{w.desc['where']}: a compile process died ({outcome}); the build can be rerun")
            failures.setdefault(w.unit.name, {}).setdefault(step.__name__, message)
        elif outcome:
            report.warnings(w.desc["where"], outcome)
        report.step(w.unit.name, not isinstance(outcome, BaseException))
        if step is not nvcc_compile.compile_target:
            return []
        pending[w.unit.name] -= 1
        if pending[w.unit.name]:
            return []
        if "compile_target" in failures.get(w.unit.name, {}):
            report.step(w.unit.name, False)  # its packing, which cannot run
            return []
        return [(w, fatbin.build_unit, (w.desc, str(toolkit.fatbinary), w.files))]

    if jobs == 1 or len(first) + len(later) <= 1:
        queue = [*first, *later, *lower.values()]
        while queue:
            w, step, args = queue.pop(0)
            queue += finished(w, step, run_step(step, args))
        return failures
    # spawn, not fork: the executor's own thread is running when it starts workers. As many steps run as
    # there are processes, picked in this order: a unit's lowering or packing once the steps it needs
    # ended (so a name or JIT error comes early), every unit's first step, then the other targets.
    context = multiprocessing.get_context("spawn")
    ready: list = []
    first.reverse()
    later.reverse()
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(first) + len(later)), mp_context=context) as pool:
        running: dict = {}
        while True:
            while len(running) < jobs and (ready or first or later):
                queue = ready or first or later
                w, step, args = queue.pop()
                try:
                    running[pool.submit(run_step, step, args)] = (w, step, queue is first)
                except concurrent.futures.process.BrokenProcessPool as e:
                    ready += finished(w, step, e)
                    if queue is first:
                        ready.append(lower.pop(w.unit.name))
            if not running:
                break
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                w, step, was_first = running.pop(future)
                try:
                    outcome = future.result()
                except concurrent.futures.process.BrokenProcessPool as e:
                    outcome = e
                ready += finished(w, step, outcome)
                if was_first:  # the unit's headers are listed: its lowering can run
                    ready.append(lower.pop(w.unit.name))
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
