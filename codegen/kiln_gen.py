#!/usr/bin/env python3
"""kiln's generator: expands a spec table into kernel translation units, compiles and names their
kernels, packs each unit's binaries into standard compressed fatbins, and emits the catalog
(registration table + embedded fatbins). Every output is deterministic
and rewritten only when it changes.

  build    every step below for a whole table, units in parallel processes, only what changed
           (what a build system calls: one command per table)
  units    list the units and their targets ("name sm_80,sm_90,compute_90" a line)
  registry the table's registry name and C++ namespace ("name namespace"): what a build system names
           the outputs after and a tool's main calls (cmake/kilnConfig.cmake.in)
  source   render one unit's translation unit and its description (JSON)
  compile  nvcc one unit for one target (compute_XX -> PTX; sm_XX -> cubin, assembled from the PTX
           after kiln-ptx-strip), with a depfile
  lower    ask NVRTC for the mangled name of each of a unit's kernels
  fatbin   pack one unit's compiled targets into its fatbins (fatbinary, compressed)
  catalog  check every fatbin's images and emit the registration table (.cpp/.hpp) and the .incbin
           assembly of all fatbins
  plan-types  the types of libkiln_prim's fixed-type plans, an X-macro list per prim.* family, from
           kiln's primitives table (kiln/prim/plan_types.hpp)
  from-record  turn a demand record (KILN_RECORD) into a spec table: the programs a run compiled at run
           time, with their sources, to embed next release

This file is the command line only: each command calls its step (unit_source.py, nvcc_compile.py,
lowering.py, fatbin.py, catalog.py, plan_types.py), and `build` calls table_build.py, which runs them all
over a table. No module of the generator imports this file; the kiln-gen launcher and the tests do.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

import catalog
import cuda_toolkit
import demand_record
import errors
import fatbin
import lowering
import names_cache
import nvcc_compile
import plan_types
import progress
import render
import spec as specmod
import table_build
import unit_source


# -- commands ---------------------------------------------------------------------------------------

def load_spec(args) -> specmod.Spec:
    archs = specmod.parse_archs([a for a in args.archs.split(",") if a], "-Darchs")
    spec = specmod.load(args.spec, archs, args.ptx, getattr(args, "jit_only", False))
    if args.linked_only:
        # Each unit is what it is in the whole table (its text, digest and cache key): only fewer of them.
        spec = dataclasses.replace(spec, units=tuple(u for u in spec.units if u.linked))
    return spec


def cmd_units(args) -> int:
    spec = load_spec(args)
    for u in spec.units:
        print(u.name, ",".join(u.targets) or "jit_only")
    return 0


def cmd_registry(args) -> int:
    spec = load_spec(args)
    print(spec.name, spec.namespace)
    return 0


def cmd_source(args) -> int:
    spec = load_spec(args)
    unit = spec.unit(args.unit)
    files = unit_source.write_source(spec, unit, Path(args.outdir))
    render.write_depfile(Path(args.depfile), files.source, unit_source.source_inputs(spec, unit))
    return 0


def cmd_compile(args) -> int:
    sys.stderr.write(nvcc_compile.compile_target(render.read_json(args.unit_json), args.target, args.nvcc,
                                                 Path(args.input), Path(args.output), Path(args.headers),
                                                 Path(args.depfile), ptx_strip(args)))
    return 0


def cmd_lower(args) -> int:
    lowering.lower_unit(render.read_json(args.unit_json), Path(args.input), args.nvrtc, Path(args.cuda_root),
                        Path(args.output), Path(args.headers), Path(args.bundle),
                        Path(args.types) if args.types else None)
    return 0


def cmd_fatbin(args) -> int:
    desc = render.read_json(args.unit_json)
    fatbin.build_unit(desc, args.fatbinary, unit_source.UnitFiles(Path(args.dir), desc["registry"], desc["unit"]))
    return 0


def cmd_catalog(args) -> int:
    catalog.write_catalog(load_spec(args), Path(args.dir), Path(args.toolkit),
                          {kind: Path(getattr(args, kind)) for kind in catalog.CATALOG_TEMPLATES})
    return 0


def cmd_plan_types(args) -> int:
    plan_types.write_header(load_spec(args), Path(args.output), Path(args.depfile) if args.depfile else None)
    return 0


def cmd_build(args) -> int:
    spec = load_spec(args)
    outdir = Path(args.outdir) if args.outdir else declared_outdir(spec, [Path(o) for o in args.outputs])
    report = progress.TerminalReport(spec.name, args.warnings)
    toolkit = cuda_toolkit.Toolkit.at(Path(args.toolkit))
    names = None
    if args.names_cache:
        try:
            names = names_cache.NamesCache.open(Path(args.names_cache), str(toolkit.nvrtc))
        except names_cache.CacheUnusable as e:
            print(f"kiln-gen: --names-cache {e}: not used; every stale unit's names come from NVRTC", file=sys.stderr)
    try:
        table_build.build(spec, toolkit, ptx_strip(args), outdir,
                          Path(args.depfile) if args.depfile else None, args.jobs, report, names)
    finally:
        report.finish()
    return 0


def declared_outdir(spec: specmod.Spec, outputs: list[Path]) -> Path:
    """The directory of the outputs a build file declares, once they are the ones this table makes: a
    registry renamed in its table while the build still declares the old names would otherwise leave the
    old catalog in place, to be compiled and linked as if it were current."""
    outdir = outputs[0].parent
    expected = catalog.outputs(outdir, spec.name)
    if sorted(outputs) != sorted(expected.values()):
        raise errors.GenError(
            f"{spec.path}: [registry] name = \"{spec.name}\": kiln-gen writes "
            f"{', '.join(p.name for p in expected.values())}, but the build declares "
            f"{', '.join(str(p) for p in outputs)}; name the outputs after the registry in the build file "
            f"(`output:` of its custom_target)")
    return outdir


def ptx_strip(args) -> str:
    """The kiln-ptx-strip the cubins are assembled after: --ptx-strip, else $KILN_PTX_STRIP."""
    tool = args.ptx_strip or os.environ.get("KILN_PTX_STRIP")
    if not tool:
        raise errors.GenError("no kiln-ptx-strip: pass --ptx-strip PATH before the command, or set KILN_PTX_STRIP "
                              "(Meson's kiln_gen and the installed kiln-gen name kiln's own)")
    if not (Path(tool).is_file() and os.access(tool, os.X_OK)):
        raise errors.GenError(f"kiln-ptx-strip {tool} is not an executable file: build kiln (it makes one), "
                              f"or point --ptx-strip at one")
    return tool


def cmd_from_record(args) -> int:
    record = demand_record.read(Path(args.record))
    table = demand_record.write_table(record, Path(args.out), args.name)
    print(f"kiln-gen: {table}: {len(record.programs)} program(s) of {args.record}")
    return 0


# -- arguments --------------------------------------------------------------------------------------

def parser(toolkit: str | None = None, ptx_strip: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kiln-gen", description=__doc__.split("\n\n")[0])
    p.add_argument("--ptx-strip", default=ptx_strip,
                   help="kiln's kiln-ptx-strip, which build and compile run on PTX before assembling cubins "
                        "(default: %(default)s, else $KILN_PTX_STRIP)")
    p.add_argument("--names-cache", metavar="DIR",
                   help="where build keeps the lower step's results (NVRTC's names of each unit's kernels), keyed by "
                        "NVRTC, the unit's text, options and headers, for every build given the same DIR (default: "
                        "none, NVRTC names every stale unit)")
    sub = p.add_subparsers(dest="command", required=True)

    def with_spec(sp):
        sp.add_argument("--spec", required=True, help="the spec table (TOML)")
        sp.add_argument("--archs", required=True, help="comma-separated default architectures, e.g. sm_80,sm_90")
        sp.add_argument("--ptx", action=argparse.BooleanOptionalAction, default=True,
                        help="embed PTX for each unit's newest architecture")
        sp.add_argument("--linked-only", action="store_true",
                        help="only the table's linked rows (linked = true), each as in the whole table: what "
                             "run-time operators need of kiln's primitives (-Dprimitives=operators)")
        return sp

    b = with_spec(sub.add_parser("build", help="build a whole table: sources, binaries, names, catalog"))
    where = b.add_mutually_exclusive_group(required=True)
    where.add_argument("--outdir",
                       help="where <registry>_catalog.hpp, <registry>_catalog.cpp and <registry>_blobs.S go "
                            "(per-unit files go to its <registry>.kiln/ subdirectory)")
    where.add_argument("--outputs", nargs=3, metavar="FILE",
                       help="the three outputs as the build file declares them (Meson: @OUTPUT@), checked against "
                            "the registry's name; they go to their directory, like --outdir")
    b.add_argument("--jit-only", action="store_true",
                   help="embed no binary: every unit as if its row said jit_only = true (the JIT tier, or the disk "
                        "cache `kiln precompile` fills, serves them); --archs then only names the kernels")
    b.add_argument("--warnings", action="store_true",
                   help="show the compilers' warnings for units that built (by default: one line counting them; "
                        "a failed unit's log is always shown)")
    b.add_argument("--toolkit", default=toolkit or os.environ.get("KILN_TOOLKIT", "/usr/local/cuda"),
                   help="the CUDA toolkit: nvcc, NVRTC, CCCL (default: %(default)s)")
    b.add_argument("--depfile", help="write a Make-style depfile for ninja: the table, sources, templates, "
                                     "the generator and every included header")
    b.add_argument("--jobs", type=positive, default=os.cpu_count() or 1,
                   help="compile processes (default: the CPU count, %(default)s)")
    with_spec(sub.add_parser("units", help="list units and targets"))
    with_spec(sub.add_parser("registry", help="print the table's registry name and C++ namespace"))
    s = with_spec(sub.add_parser("source", help="render a unit's translation unit and description"))
    s.add_argument("--unit", required=True)
    s.add_argument("--outdir", required=True)
    s.add_argument("--depfile", required=True)
    c = sub.add_parser("compile", help="nvcc a unit for one target")
    for a in ("--unit-json", "--target", "--nvcc", "--input", "--output", "--depfile", "--headers"):
        c.add_argument(a, required=True)
    lo = sub.add_parser("lower", help="mangled names of a unit's kernels, from NVRTC compiling it as the JIT will")
    for a in ("--unit-json", "--input", "--nvrtc", "--cuda-root", "--output", "--headers", "--bundle"):
        lo.add_argument(a, required=True)
    lo.add_argument("--types", help="where to write each kernel's type (JSON)")
    f = sub.add_parser("fatbin", help="pack a unit's compiled targets (in --dir) into its fatbins")
    for a in ("--unit-json", "--fatbinary", "--dir"):
        f.add_argument(a, required=True)
    ca = with_spec(sub.add_parser("catalog", help="emit the registration table and fatbin assembly"))
    for a in ("--dir", "--toolkit", "--cpp", "--hpp", "--asm"):
        ca.add_argument(a, required=True)
    pt = with_spec(sub.add_parser("plan-types", help="the types of libkiln_prim's fixed-type plans as X-macro "
                                                     "lists (kiln/prim/plan_types.hpp)"))
    pt.add_argument("--output", required=True, help="the header to write (rewritten only when it changes)")
    pt.add_argument("--depfile", help="write a Make-style depfile for ninja")
    fr = sub.add_parser("from-record", help="a spec table of the programs a demand record (KILN_RECORD) holds")
    fr.add_argument("record", help="the record a run wrote (KILN_RECORD=FILE, kiln::record_demand)")
    fr.add_argument("--out", required=True, help="the directory to write the table, sources/ and include/ into")
    fr.add_argument("--name", required=True, help="the table's registry name")
    return p


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return int(text)


COMMANDS = {"build": cmd_build, "units": cmd_units, "registry": cmd_registry, "source": cmd_source,
            "compile": cmd_compile, "lower": cmd_lower, "fatbin": cmd_fatbin, "catalog": cmd_catalog,
            "plan-types": cmd_plan_types, "from-record": cmd_from_record}


def main(argv=None, toolkit: str | None = None, ptx_strip: str | None = None) -> int:
    """`toolkit`: the default of `build --toolkit`; `ptx_strip`: of `--ptx-strip`. Set by the kiln-gen
    launcher Meson configures."""
    args = parser(toolkit, ptx_strip).parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except errors.GenError as e:
        print(f"kiln: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kiln: error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
