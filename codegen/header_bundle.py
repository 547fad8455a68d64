"""The header bundle: the headers each unit's translation unit includes, compressed into the binary, so
the JIT tier hands NVRTC the headers nvcc saw, in memory, on a machine without the toolkit's headers.

Each unit's headers are the include closure of its translation unit, followed from the TU's own
#include directives through the headers nvcc read for it (its dependency output): a header nvcc read
only for its implicit `cuda_runtime.h`, or a host header, is left out, so a unit that includes nothing
carries nothing. Every header has a name, the string NVRTC looks it up by: the path as a root-relative
#include spells it (`cub/config.cuh`). NVRTC resolves in-memory headers by name only, never relative to
the including header, so a quoted include found next to its includer (`#include "detail/x.cuh"`) is
rewritten in the bundled copy to the root-relative name of what it found (`#include "proj/detail/x.cuh"`):
the same file nvcc read. Roots, in a unit's search order: its include directories, then the toolkit's
CCCL and include directories. Names are unique within a unit; two different files a unit reaches under
one name are a build error. A directive whose target is computed by a macro (`#include MACRO`) cannot
be followed: such a unit carries every header nvcc read for it under its roots, by every name an
`#include <...>` finds it by through them (roots may nest: a table's `include/` inside the source's
directory gives `include/proj/x.cuh` and `proj/x.cuh`; the macro may spell either). The bytes of a
header are stored once, whatever its names.

The build's lower step computes a unit's headers (`unit_headers`) and checks them with NVRTC as the JIT
will see them (lowering.py), and writes them beside the unit (`write_unit_list`); the catalog step
bundles the lists of every unit (`bundle_of_lists`), so nothing is computed twice.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import cuda_toolkit
import errors
import render
import zstd

# "#include <x>" / "#include "x"", anywhere a preprocessor directive may start; group 1 the delimiter.
INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)
COMPUTED = re.compile(rb'^[ \t]*#[ \t]*include[ \t]+[A-Za-z_]', re.M)


class BundleError(errors.GenError):
    pass


@dataclass
class Bundle:
    headers: list[tuple[str, int, int]] = field(default_factory=list)  # (name, offset, size) in raw
    unit_headers: list[list[int]] = field(default_factory=list)       # per unit: indices into headers
    raw: bytearray = field(default_factory=bytearray)
    index: dict[tuple[str, bytes], int] = field(default_factory=dict)  # (name, sha256 of content) -> header
    stored: dict[bytes, int] = field(default_factory=dict)             # sha256 of content -> offset in raw

    def add(self, name: str, data: bytes) -> int:
        digest = hashlib.sha256(data).digest()
        key = (name, digest)
        if key not in self.index:
            if digest not in self.stored:  # one copy of the bytes, whatever names they go by
                self.stored[digest] = len(self.raw)
                self.raw += data
            self.index[key] = len(self.headers)
            self.headers.append((name, self.stored[digest], len(data)))
        return self.index[key]


@dataclass
class UnitInput:
    source: Path            # the unit's translation unit, as nvcc compiled it
    include_dirs: list[str]  # the unit's own -I directories, in order
    read: list[str]          # every file nvcc read for it (its dependency output)


def unit_roots(unit: UnitInput, toolkit: Path | None) -> list[Path]:
    roots = [Path(d).resolve() for d in unit.include_dirs]
    if toolkit is not None:
        roots += [d.resolve() for d in cuda_toolkit.include_dirs(toolkit)]
    return roots


def root_names(path: Path, roots: list[Path]) -> list[str]:
    """Every name `#include <name>` finds `path` by through `roots` (searched in order, as nvcc does), in
    the order of the roots: one per root that holds it, unless an earlier root holds another file by that
    name. Roots may nest (the source's directory and an include directory inside it)."""
    names = []
    for root in roots:
        if path.is_relative_to(root):
            name = path.relative_to(root).as_posix()
            found = next((r / name for r in roots if (r / name).is_file()), None)
            if found is not None and found.resolve() == path and name not in names:
                names.append(name)
    return names


def root_name(path: Path, roots: list[Path]) -> str | None:
    """The first of root_names, or None."""
    return next(iter(root_names(path, roots)), None)


def unit_headers(unit: UnitInput, roots: list[Path], where: str) -> list[tuple[str, bytes]]:
    """(name, bundled bytes) for every header the unit's translation unit reaches, the TU excluded."""
    read = {Path(p).resolve() for p in unit.read}
    source = unit.source.resolve()
    names: dict[str, Path] = {}  # name -> file: unique within the unit
    named: dict[Path, str] = {source: ""}
    contents: dict[Path, bytes] = {}
    queue, computed = deque([source]), False
    while queue:
        current = queue.popleft()
        data = current.read_bytes()
        computed = computed or COMPUTED.search(data) is not None
        edits: list[tuple[int, int, bytes]] = []
        for m in INCLUDE.finditer(data):
            spelled = m.group(2).decode("utf-8", "replace").strip()
            # The first candidate nvcc read: beside the includer (quoted), then under each root. (What a
            # root holds that nvcc did not read was not what it found: its search order differs a little.)
            beside = current.parent / spelled
            candidates = ([beside] if m.group(1) == b'"' else []) + [r / spelled for r in roots]
            found = next((c for c in candidates if c.is_file() and c.resolve() in read), None)
            if found is None:
                continue  # not taken by nvcc (a branch not compiled), or a host header NVRTC never reads
            is_beside = found is beside
            target = found.resolve()
            if target == source:
                continue
            # The name NVRTC will be asked for: the one the header already has in this unit; else the
            # spelled path, beside its includer's name when found beside it.
            name = named.get(target) or os.path.normpath(
                os.path.join(os.path.dirname(named[current]), spelled) if is_beside else spelled)
            if name.startswith("../") or name.startswith("/"):
                name = root_name(target, roots) or ""
            if not name:
                raise BundleError(f"{where}: {target} (included from {current}) has no name under the unit's include "
                                  f"directories for NVRTC to find it by; add its directory to include_dirs")
            if names.setdefault(name, target) != target:
                raise BundleError(f"{where}: two headers are included as '{name}': {names[name]} and {target}; "
                                  f"NVRTC looks headers up by name, so rename one of them")
            named[target] = name
            if name != spelled:
                if current == source:
                    raise BundleError(f"{where}: the translation unit's #include \"{spelled}\" finds {target}; "
                                      f"include it by its path under an include directory ('{name}')")
                edits.append((m.start(2) - 1, m.end(2) + 1, b'"' + name.encode() + b'"'))
            if target not in contents:
                contents[target] = b""
                queue.append(target)
        if current != source:
            for start, end, text in reversed(edits):
                data = data[:start] + text + data[end:]
            contents[current] = data
    found_as = [(named[p], contents[p]) for p in contents]
    if computed:  # a directive this scan cannot follow: every header nvcc read, by each name it has under the roots
        for path in sorted(read):
            if path == source or path in named:
                continue
            data = None
            for name in root_names(path, roots):
                if name not in names:
                    data = path.read_bytes() if data is None else data
                    names[name] = path
                    found_as.append((name, data))
    return sorted(found_as)


def build_bundle(units: list[UnitInput], toolkit: Path | None, where: list[str] | None = None) -> Bundle:
    """The bundle of a registry's units; `where` names each unit in errors."""
    label = (lambda i: where[i]) if where else (lambda i: str(units[i].source))
    return bundle_of_lists([unit_headers(u, unit_roots(u, toolkit), label(i)) for i, u in enumerate(units)])


def bundle_of_lists(lists: list[list[tuple[str, bytes]]]) -> Bundle:
    """The bundle of a registry whose units include the (name, bytes) of each list."""
    bundle = Bundle()
    for headers in lists:
        bundle.unit_headers.append(sorted({bundle.add(name, data) for name, data in headers}))
    return bundle


def write_unit_list(path: Path, headers: list[tuple[str, bytes]], read: list[str]) -> None:
    """A unit's headers as the lower step found them, for the catalog step: each name with the file nvcc
    read (a path into the source or toolkit tree, not a copy), and the bytes themselves only where the
    bundled copy differs from the file (a directive rewritten to a header's name)."""
    write_unit_lists([path], headers, read)


def write_unit_lists(paths: list[Path], headers: list[tuple[str, bytes]], read: list[str]) -> None:
    """write_unit_list for units that share their headers (lowering.lower_group): the files read once."""
    by_content: dict[bytes, str] = {}
    for p in read:
        try:
            by_content.setdefault(hashlib.sha256(Path(p).read_bytes()).digest(), str(Path(p).resolve()))
        except OSError:
            pass
    rows = []
    for name, data in headers:
        file = by_content.get(hashlib.sha256(data).digest())
        rows.append({"name": name, "file": file} if file else
                    {"name": name, "bytes": base64.b64encode(data).decode("ascii")})
    for path in paths:
        render.write_json(path, {"headers": rows})


def read_unit_list(path: Path, files: dict[str, bytes] | None = None) -> list[tuple[str, bytes]]:
    """What write_unit_list wrote, with the bytes read back. `files` ({path: bytes}) keeps what was read
    for the caller's next lists: a table's units share most of their headers."""
    files = {} if files is None else files
    out = []
    for row in render.read_json(path)["headers"]:
        if "file" in row:
            if row["file"] not in files:
                files[row["file"]] = Path(row["file"]).read_bytes()
            data = files[row["file"]]
        else:
            data = base64.b64decode(row["bytes"])
        out.append((row["name"], data))
    return out


def compress(raw: bytes, output: Path) -> tuple[int, str]:
    """Writes `raw` as one zstd frame (level 12, content checksum on) to `output`; returns its size and SHA-256."""
    data = zstd.compress(raw, level=12)
    if not output.exists() or output.read_bytes() != data:
        output.write_bytes(data)
    return len(data), hashlib.sha256(data).hexdigest()
