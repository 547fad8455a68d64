"""A demand record (runtime/src/program/record.cpp writes it: KILN_RECORD) turned into a spec table.

Every program given at run time that a run compiled becomes a [[unit]] row: its source written beside
the table, its headers under include/, its options and name expressions as the row's. Kernels of tables
a run could not take from an embedded binary are already in their tables; they are listed in a comment.
The table then builds with kiln-gen like any other, so the next release embeds what this one compiled.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import errors

HEADER = b"kiln record 1\n"


@dataclass
class Program:
    label: str = ""
    source: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)


@dataclass
class Record:
    programs: list[Program] = field(default_factory=list)
    kernels: list[tuple[str, str, int]] = field(default_factory=list)  # registry, kernel, arch


class _Reader:
    def __init__(self, data: bytes, path: Path):
        self.data, self.path, self.pos = data, path, 0
        self.mark = 0  # where the field being read began: what an error names

    def wrong(self, what: str):
        line = self.data.count(b"\n", 0, self.mark) + 1
        raise errors.GenError(f"{self.path}:{line}: not a kiln demand record: {what}")

    def done(self) -> bool:
        return self.pos >= len(self.data)

    def line(self) -> str:
        self.mark = self.pos
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            self.wrong("an unterminated line")
        text = self.data[self.pos:end].decode("utf-8", "replace")
        self.pos = end + 1
        return text

    def peek_kind(self) -> str:
        end = self.data.find(b"\n", self.pos)
        head = self.data[self.pos:end if end >= 0 else len(self.data)].decode("utf-8", "replace")
        return head.split(" ", 1)[0]

    def value(self, kind: str) -> str:
        head = self.line()
        prefix = kind + " "
        if not head.startswith(prefix) or not head[len(prefix):].isdigit():
            self.wrong(f"'{kind} N' expected, found {head[:40]!r}")
        n = int(head[len(prefix):])
        if self.pos + n >= len(self.data) or self.data[self.pos + n:self.pos + n + 1] != b"\n":
            self.wrong(f"{kind}: a value of {n} bytes does not end in a line break")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.wrong(f"{kind}: not UTF-8")


def read(path: Path) -> Record:
    data = path.read_bytes()
    r = _Reader(data, path)
    if not data.startswith(HEADER):
        r.wrong("no 'kiln record 1' line")
    r.pos = len(HEADER)
    record = Record()
    while not r.done():
        kind = r.line()
        if kind == "program":
            p = Program(label=r.value("label"), source=r.value("source"))
            while r.peek_kind() == "header":
                p.headers.append((r.value("header"), r.value("bytes")))
            while r.peek_kind() == "option":
                p.options.append(r.value("option"))
            while r.peek_kind() == "kernel":
                p.kernels.append(r.value("kernel"))
            if r.line() != "end":
                r.wrong("'end' expected after a program")
            record.programs.append(p)
        elif kind == "table":
            registry, kernel = r.value("registry"), r.value("kernel")
            arch = r.line()
            if not arch.startswith("arch ") or not arch[5:].isdigit():
                r.wrong("'arch N' expected")
            if r.line() != "end":
                r.wrong("'end' expected after a kernel")
            record.kernels.append((registry, kernel, int(arch[5:])))
        else:
            r.wrong(f"'program' or 'table' expected, found {kind[:40]!r}")
    return record


def _identifier(text: str, taken: set[str]) -> str:
    """A table name for `text` (a label or a name expression): letters, digits and underscores, unique."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "kernel"
    if base[0].isdigit():
        base = "k_" + base
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _toml_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def write_table(record: Record, out: Path, registry: str) -> Path:
    """Writes `out`/<registry>.toml, a source per program under `out`/sources/, its headers under
    `out`/include/; returns the table's path. A program's -I options are dropped: its headers given in
    memory are written out, and other include directories must be named in the table by hand (said in a
    comment on the row)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", registry):
        raise errors.GenError(f"--name: a registry name is an identifier, got {registry!r}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "sources").mkdir(exist_ok=True)
    (out / "include").mkdir(exist_ok=True)
    lines = [f"# Made by kiln-gen from-record: the programs a run compiled at run time, to embed.",
             "", "[registry]", f"name = {_toml_string(registry)}", 'include_dirs = ["include"]', ""]
    units: set[str] = set()
    kernel_names: set[str] = set()
    seen: set[str] = set()
    for p in record.programs:
        digest = hashlib.sha256(repr((p.source, p.headers, p.options, p.kernels)).encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        unit = _identifier(p.label or "program", units)
        source = out / "sources" / f"{unit}.cu"
        source.write_text(p.source, encoding="utf-8")
        for name, text in p.headers:
            target = (out / "include" / name).resolve()
            if not str(target).startswith(str((out / "include").resolve()) + "/"):
                raise errors.GenError(f"program {p.label!r}: header name {name!r} leads out of include/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        options = [o for o in p.options if not o.startswith(("-I", "--include-path"))]
        dropped = [o for o in p.options if o.startswith(("-I", "--include-path"))]
        kernels = ", ".join(f"{_identifier(e, kernel_names)} = {_toml_string(e)}" for e in p.kernels)
        lines += ["[[unit]]"]
        if dropped:
            lines += [f"# It was compiled with {' '.join(dropped)}: name those headers' directory in include_dirs."]
        lines += [f"name = {_toml_string(unit)}", f"source = {_toml_string('sources/' + unit + '.cu')}",
                  f"kernels = {{ {kernels} }}"]
        if options:
            lines += ["options = [" + ", ".join(_toml_string(o) for o in options) + "]"]
        lines += [""]
    if not seen:
        raise errors.GenError("the record holds no program given at run time: nothing to put in a table")
    if record.kernels:
        lines += ["# Kernels of tables that no embedded binary served (add their architectures to those builds):"]
        for registry_name, kernel, arch in sorted(set(record.kernels)):
            lines += [f"#   {registry_name} {kernel} sm_{arch}"]
    table = out / f"{registry}.toml"
    table.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return table
