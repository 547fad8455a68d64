"""A unit's binaries as standard CUDA fatbins: made by the toolkit's `fatbinary` from the unit's lean cubins
and PTX (and a linked unit's LTO-IR), compressed, and read back here so the catalog can check every image
and index it.

The layout read (CUDA 13.0's fatbinary, docs/DESIGN.md "Embedded fatbins"; little-endian):
  container: u32 magic 0xBA55ED50, u16 version 1, u16 header size (16), u64 size of the images after it;
  image:     u16 kind (1 PTX, 2 ELF, 8 LTO-IR), u16, u32 header size, u64 payload size padded to 8,
             u32 stored (compressed) size at +16, u32 arch at +28, u64 flags at +40 (0x8000: the payload
             is one zstd frame), u64 decompressed size at +56 (0 when stored as is); the payload follows
             the header, the next image follows the padded payload.
Containers lie back to back: that is how the linker leaves them in `.nv_fatbin`, where cuobjdump reads them.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from pathlib import Path

import errors
import nvcc_compile
import spec as specmod
import unit_source
import zstd

MAGIC = 0xBA55ED50
CONTAINER_HEADER = struct.Struct("<IHHQ")
IMAGE_HEADER_MIN = 64
KIND_PTX, KIND_ELF, KIND_LTOIR = 1, 2, 8
# What the catalog calls each image kind.
IMAGE_KINDS = {KIND_PTX: "ptx", KIND_ELF: "cubin", KIND_LTOIR: "ltoir"}
# fatbinary's --image3 kind for each kind of target (spec.TARGET_KINDS): LTO-IR is `nvvm` there.
FATBINARY_KIND = {"sm": "elf", "compute": "ptx", "lto": "nvvm"}
FLAG_ZSTD = 0x8000
# An LTO-IR image in fatbinary's own encoding (CUDA 13.0 sets it, with 0x8000, on every compressed `nvvm`
# image, whose payload is no zstd frame): only nvJitLink reads it, handed the image's fatbin.
FLAG_LTO = 0x10000
# fatbinary's mode with the smallest output (zstd); `default`, `speed` and `balance` leave cubins as they are.
COMPRESS_MODE = "size"


class FatbinError(errors.GenError):
    pass


@dataclass(frozen=True)
class Image:
    kind: str            # "cubin", "ptx" or "ltoir", as the catalog names binaries
    arch: int
    offset: int          # of the image's header, from the start of the bytes read
    header_size: int
    padded_size: int     # the payload's room: the next image's header follows it
    stored_size: int     # the payload as stored (compressed, or not)
    size: int            # the payload as loaded
    compression: str     # "none", "zstd", or "lto" (fatbinary's own LTO-IR encoding, FLAG_LTO)
    payload: bytes       # as stored
    alone: bool = False  # the only image of its container, whose 16-byte header lies right before it

    def data(self) -> bytes:
        """The image as the driver or nvJitLink gets it."""
        if self.compression == "lto":
            raise FatbinError("an LTO-IR image in fatbinary's own encoding: only nvJitLink reads it")
        return zstd.decompress(self.payload, self.size) if self.compression == "zstd" else self.payload


def build_unit(desc: dict, fatbinary: str, files: unit_source.UnitFiles) -> None:
    """The unit's fatbins (UnitFiles.fatbins) from its compiled targets, compressed in COMPRESS_MODE and
    named for cuobjdump by the unit's source name. The cubins go into one and the PTX into another, so that
    handing the first to the driver can never make it JIT PTX (docs/DESIGN.md, "Embedded fatbins"); a
    linked unit's LTO-IR into a third, which only nvJitLink reads."""
    targets = desc["targets"]
    ident = unit_source.source_name(desc["registry"], desc["unit"])
    for output in files.fatbins(targets):
        kind = files.fatbin_kind(output)
        group = [t for t in targets if specmod.parse_target(t)[1] == kind]
        images = [f"--image3=kind={FATBINARY_KIND[kind]},sm={specmod.parse_target(t)[0]},file={files.binary(t)}"
                  for t in group]
        command = [fatbinary, "-64", f"--compress-mode={COMPRESS_MODE}", f"--ident={ident}"]
        if kind != "lto":
            nvcc_compile.run_tool(desc, " ".join(group), [*command, f"--create={output}", *images])
            continue
        # LTO-IR: one image per fatbin, back to back, so that the run time hands nvJitLink the one fatbin
        # of the arch it picked (the image's encoding is fatbinary's own, which only nvJitLink reads).
        parts = []
        for target, image in zip(group, images):
            part = output.with_name(f"{output.name}.{target}")
            nvcc_compile.run_tool(desc, target, [*command, f"--create={part}", image])
            parts.append(part.read_bytes())
            part.unlink()
        output.write_bytes(b"".join(parts))


def read(data: bytes) -> list[Image]:
    """Every image of the containers in `data`, which must hold whole containers back to back and nothing
    else. Raises FatbinError saying what is wrong and where."""
    images, pos = [], 0
    while pos < len(data):
        if len(data) - pos < CONTAINER_HEADER.size:
            raise FatbinError(f"{len(data) - pos} stray bytes at {pos}, too few for a fatbin")
        magic, version, header_size, size = CONTAINER_HEADER.unpack_from(data, pos)
        if magic != MAGIC:
            raise FatbinError(f"no fatbin at {pos} (magic {magic:#x}, expected {MAGIC:#x})")
        if version != 1 or header_size < CONTAINER_HEADER.size:
            raise FatbinError(f"the fatbin at {pos} has version {version}, header size {header_size}; kiln reads version 1")
        end = pos + header_size + size
        if end > len(data):
            raise FatbinError(f"the fatbin at {pos} claims {size} bytes of images; {len(data) - pos - header_size} follow")
        first, pos = len(images), pos + header_size
        while pos < end:
            image = read_image(data, pos, end)
            images.append(image)
            pos = image.offset + image.header_size + image.padded_size
        if len(images) - first == 1 and header_size == CONTAINER_HEADER.size:
            images[first] = dataclasses.replace(images[first], alone=True)
    return images


def read_image(data: bytes, pos: int, end: int) -> Image:
    """The image whose header starts at `pos`; neither may pass `end`, its container's end."""
    if end - pos < IMAGE_HEADER_MIN:
        raise FatbinError(f"an image header at {pos} is cut short")
    kind, _, header_size, padded, stored = struct.unpack_from("<HHIQI", data, pos)
    arch, = struct.unpack_from("<I", data, pos + 28)
    flags, = struct.unpack_from("<Q", data, pos + 40)
    raw, = struct.unpack_from("<Q", data, pos + 56)
    if kind not in IMAGE_KINDS:
        raise FatbinError(f"the image at {pos} is of kind {kind}; kiln embeds ELF (2), PTX (1) and LTO-IR (8)")
    if header_size < IMAGE_HEADER_MIN or pos + header_size + padded > end:
        raise FatbinError(f"the image at {pos} (header {header_size} bytes, payload {padded}) overruns its fatbin")
    compressed = stored != 0
    lto = compressed and kind == KIND_LTOIR and bool(flags & FLAG_LTO)
    if compressed and not lto and not flags & FLAG_ZSTD:
        raise FatbinError(f"the image at {pos} is compressed in a form kiln does not read (flags {flags:#x})")
    stored_size = stored if compressed else padded
    if stored_size > padded:
        raise FatbinError(f"the image at {pos} stores {stored_size} bytes in a payload of {padded}")
    start = pos + header_size
    return Image(kind=IMAGE_KINDS[kind], arch=arch, offset=pos, header_size=header_size,
                 padded_size=padded, stored_size=stored_size, size=raw if compressed else padded,
                 compression="lto" if lto else "zstd" if compressed else "none",
                 payload=data[start:start + stored_size])
