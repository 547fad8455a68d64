"""Where a CUDA toolkit keeps what the generator uses: nvcc, fatbinary, NVRTC, the header directories NVRTC must be
told about, and the version of its CCCL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import errors


def include_dirs(root: Path) -> list[Path]:
    """The directories nvcc searches implicitly and NVRTC does not, in nvcc's order: CCCL first (its
    directory lies inside the toolkit's include directory)."""
    return [root / "include" / "cccl", root / "include"]


def cccl_version_header(root: Path) -> Path:
    return root / "include" / "cccl" / "cuda" / "std" / "__cccl" / "version.h"


def cccl_version(root: Path) -> str:
    """The toolkit's CCCL version, e.g. "3.0.1" (CCCL_VERSION = major * 1000000 + minor * 1000 + patch)."""
    header = cccl_version_header(root)
    m = re.search(r"#\s*define\s+CCCL_VERSION\s+([0-9]+)", header.read_text(encoding="utf-8"))
    if not m:
        raise errors.GenError(f"{header}: no CCCL_VERSION; is {root} a CUDA 13 toolkit?")
    v = int(m.group(1))
    return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"


@dataclass(frozen=True)
class Toolkit:
    root: Path
    nvcc: Path
    nvrtc: Path
    fatbinary: Path

    @staticmethod
    def at(root: Path) -> "Toolkit":
        toolkit = Toolkit(root, root / "bin" / "nvcc", root / "lib64" / "libnvrtc.so", root / "bin" / "fatbinary")
        for what, path in (("nvcc", toolkit.nvcc), ("NVRTC", toolkit.nvrtc), ("fatbinary", toolkit.fatbinary),
                           ("CCCL", cccl_version_header(root))):
            if not path.is_file():
                raise errors.GenError(f"no {what} at {path}: is {root} a CUDA 13 toolkit? Pass --toolkit")
        return toolkit

    def identity(self) -> list:
        """Which compilers built a unit: a toolkit replaced in place gives other sizes and times."""
        return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in (self.nvcc, self.nvrtc, self.fatbinary)]
