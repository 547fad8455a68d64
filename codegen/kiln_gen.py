#!/usr/bin/env python3
"""kiln's generator: expands a spec table into kernel translation units, compiles and names their
kernels, and emits the catalog (registration table + embedded binaries). Every output is deterministic
and rewritten only when it changes.

  build    every step below for a whole table, units in parallel processes, only what changed
           (what a build system calls: one command per table)
  units    list the units and their targets ("name sm_80,sm_90,compute_90" a line)
  source   render one unit's translation unit and its description (JSON)
  compile  nvcc one unit for one target (sm_XX -> cubin, compute_XX -> PTX), with a depfile
  lower    ask NVRTC for the mangled name of each of a unit's kernels
  catalog  emit the registration table (.cpp/.hpp) and the .incbin assembly of all binaries
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

import cubin
import cuda_toolkit
import errors
import header_bundle
import lowering
import nvcc_compile
import render
import spec as specmod
import unit_source

BLOB_ALIGN = 64
CATALOG_TEMPLATES = {"hpp": "catalog.hpp.j2", "cpp": "catalog.cpp.j2", "asm": "blobs.S.j2"}


# -- helpers shared by the steps --------------------------------------------------------------------

def load_spec(args) -> specmod.Spec:
    archs = specmod.parse_archs([a for a in args.archs.split(",") if a], "-Darchs")
    return specmod.load(args.spec, archs, args.ptx)


def cmd_units(args) -> int:
    spec = load_spec(args)
    for u in spec.units:
        print(u.name, ",".join(u.targets))
    return 0


def cmd_source(args) -> int:
    spec = load_spec(args)
    unit = spec.unit(args.unit)
    files = unit_source.write_source(spec, unit, Path(args.outdir))
    render.write_depfile(Path(args.depfile), files.source, unit_source.source_inputs(spec, unit))
    return 0


def cmd_compile(args) -> int:
    nvcc_compile.compile_target(render.read_json(args.unit_json), args.target, args.nvcc, Path(args.input),
                                Path(args.output), Path(args.headers), Path(args.depfile))
    return 0


def cmd_lower(args) -> int:
    lowering.lower_unit(render.read_json(args.unit_json), Path(args.input), args.nvrtc, Path(args.cuda_root),
                        Path(args.output))
    return 0


class StringTable:
    """One packed character blob; add() returns a C++ StrRef initialiser."""

    def __init__(self):
        self.data = bytearray()
        self.index: dict[str, tuple[int, int]] = {}

    def add(self, s: str) -> str:
        if s not in self.index:
            b = s.encode("utf-8")
            self.index[s] = (len(self.data), len(b))
            self.data += b
        off, size = self.index[s]
        return f"{{{off}, {size}}}"

    def chunks(self, width: int = 96) -> list[str]:
        """The blob as C string literal pieces, escaped so no escape can run into the next character."""
        out, cur = [], ""
        for byte in self.data:
            ch = chr(byte)
            piece = {"\\": "\\\\", '"': '\\"', "\n": "\\n"}.get(ch) or (
                ch if 0x20 <= byte < 0x7F and ch != "?" else f"\\{byte:03o}")
            cur += piece
            if len(cur) >= width:
                out.append(cur)
                cur = ""
        if cur or not out:
            out.append(cur)
        return out


def catalog_model(spec: specmod.Spec, directory: Path, cccl_version: str, toolkit: Path | None = None) -> dict:
    """Everything the catalog templates need, with each binary checked against its unit:
    the ELF names the expected architecture and every lowered name is a kernel in it. With a toolkit,
    the headers each unit includes are bundled for the JIT tier (header_bundle.py)."""
    strings = StringTable()
    units, kernels, binaries = [], [], []
    offset = 0
    files = [unit_source.UnitFiles(directory, spec.name, u.name) for u in spec.units]
    descs = [render.read_json(f.description) for f in files]
    # The first target's list: the headers the bundle holds for the unit, and the unit's digest.
    listed = [render.read_json(f.headers(d["targets"][0])) for f, d in zip(files, descs)]
    bundle = header_bundle.build_bundle([(d["include_dirs"], h["headers"]) for d, h in zip(descs, listed)], toolkit)
    bundle_path = directory / f"{spec.name}.headers.zst"
    bundle_size, bundle_digest = header_bundle.compress(bundle.raw, bundle_path) if bundle.raw else (0, "")
    unit_headers: list[int] = []
    for ui, unit in enumerate(spec.units):
        desc = descs[ui]
        lowered = render.read_json(files[ui].names)
        first = len(binaries)
        for target in desc["targets"]:
            path = files[ui].binary(target)
            data = path.read_bytes()
            arch, ptx = specmod.parse_target(target)
            try:
                found_arch = cubin.ptx_arch(data.decode()) if ptx else cubin.cubin_arch(data)
                found = cubin.ptx_kernels(data.decode()) if ptx else cubin.cubin_kernels(data)
            except (cubin.BinaryError, UnicodeDecodeError, ValueError, IndexError) as e:
                raise errors.GenError(f"{desc['where']}: {path}: unreadable binary: {e}") from None
            if found_arch != arch:
                raise errors.GenError(f"{desc['where']}: {path} is built for sm_{found_arch}, expected {target}")
            missing = sorted(set(lowered.values()) - found)
            if missing:
                raise errors.GenError(f"{desc['where']}: {path} lacks kernel symbol(s) {', '.join(missing)}; "
                                      f"it defines {', '.join(sorted(found)) or 'none'}")
            pad = BLOB_ALIGN - len(data) % BLOB_ALIGN  # 1..64: PTX always gets its NUL
            binaries.append({
                "arch": arch, "kind": "ptx" if ptx else "cubin", "offset": offset, "size": len(data),
                "label": f"{unit.name} {target}", "path": str(path.resolve()), "pad": pad,
                "sha256": hashlib.sha256(data).hexdigest(),
            })
            offset += len(data) + pad
        units.append({"name": strings.add(unit.name), "options": strings.add("\n".join(desc["options"])),
                      "first_binary": first, "binary_count": len(binaries) - first, "label": unit.name,
                      "digest": strings.add(listed[ui]["digest"]),
                      "source": strings.add(files[ui].source.read_text(encoding="utf-8")),
                      "roots": strings.add(",".join(map(str, bundle.unit_roots[ui]))),
                      "first_header": len(unit_headers), "header_count": len(bundle.unit_headers[ui])})
        unit_headers += bundle.unit_headers[ui]
        for k in desc["kernels"]:
            kernels.append({"key": k["name"], "name": strings.add(k["name"]),
                            "expression": strings.add(k["expression"]),
                            "lowered": strings.add(lowered[k["expression"]]), "unit": ui,
                            "label": f"{k['name']} = {k['expression']}"})
    if offset >= 2**32:
        raise errors.GenError(f"{spec.path}: embedded binaries total {offset} bytes; kiln's table holds at most 4 GiB")
    kernels.sort(key=lambda k: k["key"].encode())
    headers = [{"path": strings.add(name), "offset": off, "size": size, "label": name}
               for name, off, size in bundle.headers]
    return {"units": units, "kernels": kernels, "binaries": binaries, "blobs_size": offset,
            "string_chunks": strings.chunks(), "cccl_version": cccl_version, "headers": headers,
            "unit_headers": unit_headers, "bundle_path": str(bundle_path.resolve()) if bundle.raw else "",
            "bundle_size": bundle_size, "bundle_raw_size": len(bundle.raw), "bundle_digest": bundle_digest}


def emit_catalog(spec: specmod.Spec, model: dict, header_name: str, asm_name: str) -> dict[str, str]:
    """{kind: text} for the catalog's .hpp, .cpp and .S."""
    env = render.environment()
    context = dict(model, spec_name=spec.path.name, registry=spec.name, namespace=spec.namespace,
                   header=header_name, asm_name=asm_name, blob_symbol=f"kiln_blobs_{spec.name}",
                   headers_symbol=f"kiln_headers_{spec.name}")
    return {kind: env.get_template(tpl).render(context) for kind, tpl in CATALOG_TEMPLATES.items()}


def write_catalog(spec: specmod.Spec, directory: Path, toolkit: Path, outputs: dict[str, Path]) -> None:
    """Check every binary in `directory` and write the catalog's {"hpp", "cpp", "asm"} outputs."""
    model = catalog_model(spec, directory, cuda_toolkit.cccl_version(toolkit), toolkit)
    texts = emit_catalog(spec, model, outputs["hpp"].name, outputs["asm"].name)
    for kind, path in outputs.items():
        render.write_if_different(path, texts[kind])


def catalog_inputs(toolkit: Path) -> list[Path]:
    """The files the catalog's text is made from, besides the units' outputs."""
    return [cuda_toolkit.cccl_version_header(toolkit), *(render.TEMPLATE_DIR / t for t in CATALOG_TEMPLATES.values())]


def cmd_catalog(args) -> int:
    write_catalog(load_spec(args), Path(args.dir), Path(args.toolkit),
                  {kind: Path(getattr(args, kind)) for kind in CATALOG_TEMPLATES})
    return 0


def cmd_build(args) -> int:
    import table_build  # here, not at the top: table_build imports this module (see the end of the file)
    table_build.build(load_spec(args), cuda_toolkit.Toolkit.at(Path(args.toolkit)), Path(args.outdir),
                      Path(args.depfile) if args.depfile else None, args.jobs)
    return 0


# -- command line -----------------------------------------------------------------------------------

def parser(toolkit: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kiln-gen", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def with_spec(sp):
        sp.add_argument("--spec", required=True, help="the spec table (TOML)")
        sp.add_argument("--archs", required=True, help="comma-separated default architectures, e.g. sm_80,sm_90")
        sp.add_argument("--ptx", action=argparse.BooleanOptionalAction, default=True,
                        help="embed PTX for each unit's newest architecture")
        return sp

    b = with_spec(sub.add_parser("build", help="build a whole table: sources, binaries, names, catalog"))
    b.add_argument("--outdir", required=True,
                   help="where <registry>_catalog.hpp, <registry>_catalog.cpp and <registry>_blobs.S go "
                        "(per-unit files go to its <registry>.kiln/ subdirectory)")
    b.add_argument("--toolkit", default=toolkit or os.environ.get("KILN_TOOLKIT", "/usr/local/cuda"),
                   help="the CUDA toolkit: nvcc, NVRTC, CCCL (default: %(default)s)")
    b.add_argument("--depfile", help="write a Make-style depfile for ninja: the table, sources, templates, "
                                     "the generator and every included header")
    b.add_argument("--jobs", type=positive, default=os.cpu_count() or 1,
                   help="compile processes (default: the CPU count, %(default)s)")
    with_spec(sub.add_parser("units", help="list units and targets"))
    s = with_spec(sub.add_parser("source", help="render a unit's translation unit and description"))
    s.add_argument("--unit", required=True)
    s.add_argument("--outdir", required=True)
    s.add_argument("--depfile", required=True)
    c = sub.add_parser("compile", help="nvcc a unit for one target")
    for a in ("--unit-json", "--target", "--nvcc", "--input", "--output", "--depfile", "--headers"):
        c.add_argument(a, required=True)
    lo = sub.add_parser("lower", help="mangled names of a unit's kernels, from NVRTC")
    for a in ("--unit-json", "--input", "--nvrtc", "--cuda-root", "--output"):
        lo.add_argument(a, required=True)
    ca = with_spec(sub.add_parser("catalog", help="emit the registration table and blob assembly"))
    for a in ("--dir", "--toolkit", "--cpp", "--hpp", "--asm"):
        ca.add_argument(a, required=True)
    return p


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return int(text)


COMMANDS = {"build": cmd_build, "units": cmd_units, "source": cmd_source, "compile": cmd_compile,
            "lower": cmd_lower, "catalog": cmd_catalog}


def main(argv=None, toolkit: str | None = None) -> int:
    """`toolkit`: the default of `build --toolkit`, set by the kiln-gen launcher Meson configures."""
    args = parser(toolkit).parse_args(argv)
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
