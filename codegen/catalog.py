"""The build's catalog step: checks every image in a table's fatbins against its unit and emits the
catalog, the registration table (<registry>_catalog.hpp/.cpp: static tables, one packed string blob, an
index of every image) and the assembly that embeds the fatbins where CUDA's tools look for them and the
header bundle (<registry>_blobs.S)."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import cubin
import cuda_toolkit
import errors
import fatbin
import header_bundle
import render
import spec as specmod
import unit_source

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
    """Everything the catalog templates need, with each image of each unit's fatbins checked against its
    unit (checked_images) and the unit's images exactly its targets, in order. The headers each unit
    includes are bundled for the JIT tier as the lower step checked them (header_bundle.py)."""
    strings = StringTable()
    units, kernels, binaries, fatbins = [], [], [], []
    offset = 0
    files = [unit_source.UnitFiles(directory, spec.name, u.name) for u in spec.units]
    descs = [render.read_json(f.description) for f in files]
    # The first target's list (a JIT-only unit's own): the unit's digest.
    listed = [render.read_json(f.listed(d["targets"])) for f, d in zip(files, descs)]
    read: dict[str, bytes] = {}  # each header file read once for the table
    bundle = header_bundle.bundle_of_lists([header_bundle.read_unit_list(f.bundle, read) for f in files])
    bundle_path = directory / f"{spec.name}.headers.zst"
    bundle_size, bundle_digest = header_bundle.compress(bundle.raw, bundle_path) if bundle.raw else (0, "")
    unit_headers: list[int] = []
    for ui, unit in enumerate(spec.units):
        desc = descs[ui]
        lowered = render.read_json(files[ui].names)
        kinds = render.read_json(files[ui].types)
        first, fatbins_offset = len(binaries), offset
        for path in files[ui].fatbins(desc["targets"]):
            data = path.read_bytes()
            images = checked_images(desc, files[ui], path, data, set(lowered.values()))
            for image in images:
                binaries.append({
                    "arch": image.arch, "kind": image.kind, "offset": offset + image.offset, "size": image.size,
                    "stored_size": image.stored_size, "compression": image.compression,
                    "label": f"{unit.name} {target_of(image)}",
                })
            fatbins.append({"path": str(path.resolve()), "offset": offset, "size": len(data),
                            "label": f"{unit.name}: {' '.join(map(target_of, images))}",
                            "sha256": hashlib.sha256(data).hexdigest()})
            offset += len(data)
        embedded = [b["label"].split(" ")[1] for b in binaries[first:]]
        if embedded != desc["targets"]:
            raise errors.GenError(f"{desc['where']}: its fatbins hold {', '.join(embedded) or 'nothing'}; "
                                  f"expected {', '.join(desc['targets'])}")
        units.append({"name": strings.add(unit.name), "options": strings.add("\n".join(desc["options"])),
                      "fatbins_offset": fatbins_offset, "fatbins_size": offset - fatbins_offset,
                      "first_binary": first, "binary_count": len(binaries) - first, "label": unit.name,
                      "digest": strings.add(listed[ui]["digest"]),
                      "source": strings.add(files[ui].source.read_text(encoding="utf-8")),
                      "first_header": len(unit_headers), "header_count": len(bundle.unit_headers[ui]),
                      "source_name": strings.add(unit_source.source_name(spec.name, unit.name)),
                      "linked": unit.linked,
                      # Whether the JIT may compile its kernels in parts (nvcc_compile.unit_splittable).
                      "splittable": not unit.linked and listed[ui].get("splittable", False)})
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
    return {"units": units, "kernels": kernels, "binaries": binaries, "fatbins": fatbins, "blobs_size": offset,
            "string_chunks": strings.chunks(), "cccl_version": cccl_version, "headers": headers,
            "unit_headers": unit_headers, "bundle_path": str(bundle_path.resolve()) if bundle.raw else "",
            "bundle_size": bundle_size, "bundle_raw_size": len(bundle.raw), "bundle_digest": bundle_digest}


def target_of(image: fatbin.Image) -> str:
    return specmod.arch_label(image.arch, {"cubin": "sm", "ptx": "compute", "ltoir": "lto"}[image.kind])


def checked_images(desc: dict, files: unit_source.UnitFiles, path: Path, data: bytes, lowered: set[str]) -> list:
    """The images of one of a unit's fatbins, each checked: it is readable and decompresses to its stated
    size, its ELF header (or PTX .target) names the architecture its fatbin entry names, every lowered name
    is a kernel in it, and a cubin is byte for byte the one the compile step made. LTO-IR, which only
    nvJitLink reads, must be alone in its fatbin; its kernels are checked when the run time links it (the
    cubin must define every one)."""
    try:
        images = fatbin.read(data)
    except errors.GenError as e:
        raise errors.GenError(f"{desc['where']}: {path}: unreadable fatbin: {e}") from None
    for image in images:
        where = f"{desc['where']}: {path}: the {target_of(image)} image"
        if image.kind == "ltoir":
            # In fatbinary's own encoding, alone in its fatbin: the run time hands nvJitLink that fatbin.
            if image.compression != "lto" or not image.alone:
                raise errors.GenError(f"{where} is not an LTO-IR image of fatbinary's alone in its fatbin "
                                      f"(stored: {image.compression}): rebuild")
            continue
        try:
            content = image.data()
            ptx = image.kind == "ptx"
            text = content.rstrip(b"\0").decode() if ptx else ""
            found_arch = cubin.ptx_arch(text) if ptx else cubin.cubin_arch(content)
            found = cubin.ptx_kernels(text) if ptx else cubin.cubin_kernels(content)
        except (errors.GenError, cubin.BinaryError, UnicodeDecodeError, ValueError, IndexError, struct.error) as e:
            raise errors.GenError(f"{where} is unreadable: {e}") from None
        if found_arch != image.arch:
            raise errors.GenError(f"{where} is built for sm_{found_arch}")
        missing = sorted(lowered - found)
        if missing:
            raise errors.GenError(f"{where} lacks kernel symbol(s) {', '.join(missing)}; "
                                  f"it defines {', '.join(sorted(found)) or 'none'}")
        if not ptx and content != files.binary(target_of(image)).read_bytes():
            raise errors.GenError(f"{where} differs from {files.binary(target_of(image))}: rebuild")
    return images


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
