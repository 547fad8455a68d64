"""The header bundle: every header a registry's units include, compressed into the binary, so the JIT
tier can hand NVRTC the same headers nvcc saw on a machine without the CUDA toolkit's headers.

Headers come from nvcc's own dependency output (the `.headers.json` beside each binary). Each is
stored once per registry under a root: `r<i>/<path relative to root i>`, where the roots are the
units' include directories, then the toolkit's CCCL and include directories. At run time the bundle
is unpacked into one directory and each unit gets `-I<dir>/r<i>` for its roots, in its search order.
Host-only headers (glibc, the host compiler's) lie under no root and are left out: NVRTC does not
read them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import cuda_toolkit
import errors


class BundleError(errors.GenError):
    pass


@dataclass
class Bundle:
    roots: list[Path] = field(default_factory=list)
    headers: list[tuple[str, int, int]] = field(default_factory=list)  # (r<i>/relative path, offset, size)
    unit_roots: list[list[int]] = field(default_factory=list)         # per unit: root indices, search order
    unit_headers: list[list[int]] = field(default_factory=list)       # per unit: indices into headers
    raw: bytearray = field(default_factory=bytearray)

    def root(self, path: Path) -> int:
        if path not in self.roots:
            self.roots.append(path)
        return self.roots.index(path)


def build_bundle(units: list[tuple[list[str], list[str]]], toolkit: Path | None) -> Bundle:
    """units: per unit, (its include directories, the headers nvcc read for it)."""
    bundle = Bundle()
    index: dict[str, int] = {}
    for include_dirs, headers in units:
        roots = [bundle.root(Path(d).resolve()) for d in include_dirs]
        if toolkit is not None:
            roots += [bundle.root(d.resolve()) for d in cuda_toolkit.include_dirs(toolkit)]
        mine = []
        for h in headers:
            path = Path(h).resolve()
            name = next((f"r{r}/{path.relative_to(bundle.roots[r]).as_posix()}" for r in roots
                         if path.is_relative_to(bundle.roots[r])), None)
            if name is None:
                continue
            if name not in index:
                data = path.read_bytes()
                index[name] = len(bundle.headers)
                bundle.headers.append((name, len(bundle.raw), len(data)))
                bundle.raw += data
            mine.append(index[name])
        bundle.unit_roots.append(roots)
        bundle.unit_headers.append(sorted(set(mine)))
    return bundle


def compress(raw: bytes, output: Path) -> tuple[int, str]:
    """Writes `raw` as one zstd frame (content checksum on) to `output`; returns its size and SHA-256.
    Through libzstd with ctypes: the run-time library kiln links anyway, where a zstd command may be absent."""
    lib = _libzstd()
    cctx = lib.ZSTD_createCCtx()
    try:
        for parameter, value in ((100, 12), (201, 1)):  # ZSTD_c_compressionLevel, ZSTD_c_checksumFlag
            if lib.ZSTD_isError(lib.ZSTD_CCtx_setParameter(cctx, parameter, value)):
                raise BundleError("libzstd rejected a compression parameter")
        capacity = lib.ZSTD_compressBound(len(raw))
        out = ctypes.create_string_buffer(capacity)
        size = lib.ZSTD_compress2(cctx, out, capacity, bytes(raw), len(raw))
        if lib.ZSTD_isError(size):
            raise BundleError(f"zstd: {lib.ZSTD_getErrorName(size).decode()}")
    finally:
        lib.ZSTD_freeCCtx(cctx)
    data = out.raw[:size]
    if not output.exists() or output.read_bytes() != data:
        output.write_bytes(data)
    return len(data), hashlib.sha256(data).hexdigest()


def _libzstd():
    name = ctypes.util.find_library("zstd") or "libzstd.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise BundleError(f"cannot load libzstd ({name}: {e}); install libzstd-dev") from None
    lib.ZSTD_createCCtx.restype = ctypes.c_void_p
    lib.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
    lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_compress2.restype = ctypes.c_size_t
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
    lib.ZSTD_getErrorName.restype = ctypes.c_char_p
    return lib
