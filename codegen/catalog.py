"""The build's catalog step: checks every binary of a table against its unit and emits the catalog, the
registration table (<registry>_catalog.hpp/.cpp: static tables, one packed string blob) and the
assembly that embeds every binary and the header bundle (<registry>_blobs.S)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cubin
import cuda_toolkit
import errors
import header_bundle
import render
import spec as specmod
import unit_source

BLOB_ALIGN = 64
CATALOG_TEMPLATES = {"hpp": "catalog.hpp.j2", "cpp": "catalog.cpp.j2", "asm": "blobs.S.j2"}


def outputs(outdir: Path, registry: str) -> dict[str, Path]:
    """Where `build` writes the catalog's files: {kind: path} for each of CATALOG_TEMPLATES."""
    return {"hpp": outdir / f"{registry}_catalog.hpp", "cpp": outdir / f"{registry}_catalog.cpp",
            "asm": outdir / f"{registry}_blobs.S"}


class StringTable:
    """One packed character blob; add() returns a C++ StrRef initialiser, designated like every entry."""

    def __init__(self):
        self.data = bytearray()
        self.index: dict[str, tuple[int, int]] = {}

    def add(self, s: str) -> str:
        if s not in self.index:
            b = s.encode("utf-8")
            self.index[s] = (len(self.data), len(b))
            self.data += b
        off, size = self.index[s]
        return f"{{.offset = {off}, .size = {size}}}"

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


def catalog_model(spec: specmod.Spec, directory: Path, cccl_version: str) -> dict:
    """Everything the catalog templates need, with each binary checked against its unit:
    the ELF names the expected architecture and every lowered name is a kernel in it. The headers each
    unit includes are bundled for the JIT tier as the lower step checked them (header_bundle.py)."""
    strings = StringTable()
    units, kernels, binaries = [], [], []
    offset = 0
    files = [unit_source.UnitFiles(directory, spec.name, u.name) for u in spec.units]
    descs = [render.read_json(f.description) for f in files]
    # The first target's list (a JIT-only unit's own): the unit's digest.
    listed = [render.read_json(f.listed(d["targets"])) for f, d in zip(files, descs)]
    bundle = header_bundle.bundle_of_lists([header_bundle.read_unit_list(f.bundle) for f in files])
    bundle_path = directory / f"{spec.name}.headers.zst"
    bundle_size, bundle_digest = header_bundle.compress(bundle.raw, bundle_path) if bundle.raw else (0, "")
    unit_headers: list[int] = []
    for ui, unit in enumerate(spec.units):
        desc = descs[ui]
        lowered = render.read_json(files[ui].names)
        kinds = render.read_json(files[ui].types)
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
                      "first_header": len(unit_headers), "header_count": len(bundle.unit_headers[ui]),
                      "source_name": strings.add(unit_source.source_name(spec.name, unit.name))})
        unit_headers += bundle.unit_headers[ui]
        for k in desc["kernels"]:
            kernels.append({"key": k["name"], "name": strings.add(k["name"]),
                            "expression": strings.add(k["expression"]),
                            "lowered": strings.add(lowered[k["expression"]]), "unit": ui,
                            "label": f"{k['name']} = {k['expression']}",
                            "signature": host_signature(kinds.get(k["expression"]))})
    if offset >= 2**32:
        raise errors.GenError(f"{spec.path}: embedded binaries total {offset} bytes; kiln's table holds at most 4 GiB")
    kernels.sort(key=lambda k: k["key"].encode())
    headers = [{"name": strings.add(name), "offset": off, "size": size, "label": name}
               for name, off, size in bundle.headers]
    return {"units": units, "kernels": kernels, "binaries": binaries, "blobs_size": offset,
            "string_chunks": strings.chunks(), "cccl_version": cccl_version, "headers": headers,
            "unit_headers": unit_headers, "bundle_path": str(bundle_path.resolve()) if bundle.raw else "",
            "bundle_size": bundle_size, "bundle_raw_size": len(bundle.raw), "bundle_digest": bundle_digest}


# What a parameter type may be made of for a typed handle: what every host compiler knows, without the
# project's device headers.
BUILT_IN_WORDS = {"void", "bool", "char", "signed", "unsigned", "short", "int", "long", "float", "double",
                  "const", "volatile"}


def host_signature(kind: str | None) -> str:
    """The kernel's type for its typed handle (`void(float const*, int)`) when every parameter is a built-in
    type or a pointer to one; else "" (the handle then takes arguments as they are)."""
    if not kind or not kind.startswith("void(") or not kind.endswith(")"):
        return ""
    for parameter in filter(None, (p.strip() for p in kind[len("void("):-1].split(","))):
        words = parameter.replace("*", " ").split()
        if not words or not set(words) <= BUILT_IN_WORDS:
            return ""
    return kind


def emit_catalog(spec: specmod.Spec, model: dict, header_name: str, asm_name: str) -> dict[str, str]:
    """{kind: text} for the catalog's .hpp, .cpp and .S."""
    env = render.environment()
    context = dict(model, spec_name=spec.path.name, registry=spec.name, namespace=spec.namespace,
                   header=header_name, asm_name=asm_name, blob_symbol=f"kiln_blobs_{spec.name}",
                   headers_symbol=f"kiln_headers_{spec.name}")
    return {kind: env.get_template(tpl).render(context) for kind, tpl in CATALOG_TEMPLATES.items()}


def write_catalog(spec: specmod.Spec, directory: Path, toolkit: Path, outputs: dict[str, Path]) -> None:
    """Check every binary in `directory` and write the catalog's {"hpp", "cpp", "asm"} outputs."""
    model = catalog_model(spec, directory, cuda_toolkit.cccl_version(toolkit))
    texts = emit_catalog(spec, model, outputs["hpp"].name, outputs["asm"].name)
    for kind, path in outputs.items():
        render.write_if_different(path, texts[kind])


def catalog_inputs(toolkit: Path) -> list[Path]:
    """The files the catalog's text is made from, besides the units' outputs."""
    return [cuda_toolkit.cccl_version_header(toolkit), *(render.TEMPLATE_DIR / t for t in CATALOG_TEMPLATES.values())]
