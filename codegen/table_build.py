"""`kiln-gen build`: every step (source, compile per target, lower, fatbins, catalog) for a whole spec table in one
command, so a build system needs one rule per table. Only units whose inputs changed since the last run
are recompiled (a stamp per unit); they compile in a pool of worker processes, since NVRTC does not
scale with threads (DESIGN.md)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path

import catalog
import cuda_toolkit
import errors
import fatbin
import lowering
import nvcc_compile
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
        return [*map(self.files.binary, targets), *map(self.files.headers, targets), self.files.names,
                *self.files.fatbins(targets)]


def work_dir(outdir: Path, registry: str) -> Path:
    return outdir / f"{registry}.kiln"


def build(spec: specmod.Spec, toolkit: cuda_toolkit.Toolkit, ptx_strip: str, outdir: Path,
          depfile: Path | None = None, jobs: int = 1) -> list[str]:
    """Bring the catalog of `spec` in `outdir` up to date; returns the names of the units recompiled.
    `ptx_strip` is kiln-ptx-strip (nvcc_compile.compile_target). Raises GenError naming every unit that
    failed (the others are kept, and not rebuilt next time)."""
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

    failures = compile_units(stale, toolkit, ptx_strip, jobs)
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
    settle_timestamps(list(outputs.values()), deps)
    return [w.unit.name for w in stale]


# -- which units to rebuild ---------------------------------------------------------------------------

def codegen_identity() -> str:
    """A change to the generator may change how units compile: it rebuilds them all."""
    h = hashlib.sha256()
    for p in render.CODEGEN_FILES:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def stamp_inputs(w: UnitWork, common: dict) -> dict:
    # `where` names the table as the caller spelled its path: not an input of the binaries.
    return dict(common, description={k: v for k, v in w.desc.items() if k != "where"})


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
    for target in w.desc["targets"]:
        headers.update(render.read_json(w.files.headers(target))["headers"])
    return sorted(headers)


# -- compiling ----------------------------------------------------------------------------------------

def compile_units(stale: list[UnitWork], toolkit: cuda_toolkit.Toolkit, ptx_strip: str, jobs: int) -> dict[str, dict]:
    """Compile every target and lower the names of each stale unit, then pack each unit whose targets all
    compiled into its fatbins. Returns the failures as {unit: {step: message}}: a unit's first failed
    compile (the other targets' logs say the same) and its failed lowering (NVRTC's view, which names the
    field when a name expression is wrong)."""
    tasks = []
    for w in stale:
        w.files.stamp.unlink(missing_ok=True)  # an interrupted build must not look finished
        targets = w.desc["targets"]
        for target in targets:
            arch, ptx = specmod.parse_target(target)
            # A compute_XX target beside sm_XX: its PTX is the first step of that cubin, made once there.
            if ptx and f"sm_{arch}" in targets:
                continue
            also = f"compute_{arch}" if not ptx and f"compute_{arch}" in targets else None
            ptx_too = nvcc_compile.TargetFiles(w.files.binary(also), w.files.headers(also),
                                               w.files.compile_depfile(also)) if also else None
            tasks.append((w, nvcc_compile.compile_target, (w.desc, target, str(toolkit.nvcc), w.files.source,
                                                       w.files.binary(target), w.files.headers(target),
                                                       w.files.compile_depfile(target), ptx_strip, ptx_too)))
        tasks.append((w, lowering.lower_unit, (w.desc, w.files.source, str(toolkit.nvrtc), toolkit.root,
                                               w.files.names)))
    failures = run_tasks(tasks, jobs)
    compiled = [w for w in stale if "compile_target" not in failures.get(w.unit.name, {})]
    for name, failed in run_tasks([(w, fatbin.build_unit, (w.desc, str(toolkit.fatbinary), w.files))
                                   for w in compiled], jobs).items():
        failures.setdefault(name, {}).update(failed)
    return failures


def run_tasks(tasks: list, jobs: int) -> dict[str, dict]:
    """Runs (unit work, step, arguments) tasks, in `jobs` processes; returns {unit: {step: message}}."""
    failures: dict[str, dict] = {}

    def failed(w: UnitWork, step, message: str):
        failures.setdefault(w.unit.name, {}).setdefault(step.__name__, message)

    if jobs == 1 or len(tasks) <= 1:
        for w, step, args in tasks:
            try:
                step(*args)
            except errors.GenError as e:
                failed(w, step, str(e))
        return failures
    # spawn, not fork: the executor's own thread is running when it starts workers.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(tasks)), mp_context=context) as pool:
        futures = [(w, step, pool.submit(step, *args)) for w, step, args in tasks]
        for w, step, future in futures:
            try:
                future.result()
            except errors.GenError as e:
                failed(w, step, str(e))
            except concurrent.futures.process.BrokenProcessPool as e:
                failed(w, step, f"{w.desc['where']}: a compile process died ({e}); the build can be rerun")
    return failures


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


def settle_timestamps(outputs: list[Path], deps: list[Path]) -> None:
    """Make every output at least as new as its newest input. Outputs are rewritten only when their
    content changes, and ninja (without restat) would otherwise rerun this command on every build after
    an edit that changed no output."""
    newest = max((p.stat().st_mtime_ns for p in deps if p.exists()), default=0)
    for out in outputs:
        if out.stat().st_mtime_ns < newest:
            os.utime(out)
