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

import hashlib
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


class BundleError(Exception):
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


def toolkit_roots(toolkit: Path) -> list[Path]:
    # CCCL first: its directory lies inside the toolkit's include directory.
    return [(toolkit / "include" / "cccl").resolve(), (toolkit / "include").resolve()]


def build_bundle(units: list[tuple[list[str], list[str]]], toolkit: Path | None) -> Bundle:
    """units: per unit, (its include directories, the headers nvcc read for it)."""
    bundle = Bundle()
    index: dict[str, int] = {}
    for include_dirs, headers in units:
        roots = [bundle.root(Path(d).resolve()) for d in include_dirs]
        if toolkit is not None:
            roots += [bundle.root(r) for r in toolkit_roots(toolkit)]
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
    """Writes `raw` as one zstd frame (checksum on) to `output`; returns its size and SHA-256."""
    zstd = shutil.which("zstd")
    if zstd is None:
        raise BundleError("the zstd command is needed to bundle headers for the JIT tier: apt-get install zstd")
    result = subprocess.run([zstd, "-q", "-12", "--check", "-c"], input=bytes(raw), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    if result.returncode != 0:
        raise BundleError(f"zstd failed: {result.stderr.decode(errors='replace')}")
    data = result.stdout
    if not output.exists() or output.read_bytes() != data:
        output.write_bytes(data)
    return len(data), hashlib.sha256(data).hexdigest()
