"""A demand record (runtime/src/program/record.cpp writes it: KILN_RECORD) turned into a spec table.

Every program given at run time that a run compiled becomes a [[unit]] row: its source written beside
the table, its headers under include/, its options and name expressions as the row's. Kernels of tables
a run could not take from an embedded binary are already in their tables; they are listed in a comment.
The table then builds with kiln-gen like any other, so the next release embeds what this one compiled.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

import errors

HEADER = b"kiln record 1\n"
# What a record may hold, as the runtime's reader bounds it (runtime/src/program/record.cpp): a record is
# programs' sources and headers, far below this; more is not a record to read into memory.
MAX_BYTES = 256 << 20


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


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file `path`, at most MAX_BYTES: opened without blocking (a FIFO or a device
    is refused by fstat, never waited on), read within the bound."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as e:
        raise errors.GenError(f"{path}: cannot open the demand record: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.GenError(f"{path}: not a regular file (a FIFO, device or directory is no demand record)")
        if st.st_size > MAX_BYTES:
            raise errors.GenError(f"{path}: {st.st_size} bytes, more than a demand record may have ({MAX_BYTES >> 20} MiB)")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MAX_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_BYTES:
            raise errors.GenError(f"{path}: grew past {MAX_BYTES >> 20} MiB while read: not a demand record")
        return b"".join(chunks)
    except OSError as e:
        raise errors.GenError(f"{path}: cannot read the demand record: {e.strerror}") from None
    finally:
        os.close(fd)


def read(path: Path) -> Record:
    data = _read_regular(path)
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


_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _escaped(s: str) -> str:
    """`s` as the inside of a TOML basic string: a backslash, a quote and every control character (which
    TOML forbids there, U+007F included) escaped."""
    return "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c) for c in s)


def _toml_string(s: str) -> str:
    return '"' + _escaped(s) + '"'


def _comment(s: str) -> str:
    """`s` for a comment line: a line break or control character in a record cannot end the comment."""
    return _escaped(s)


def _header_path(label: str, name: str) -> tuple[str, ...]:
    """A header's name as the parts of a path under include/; GenError for one that is not a relative path
    that stays there."""
    def refuse(why: str):
        raise errors.GenError(f"program {label!r}: header name {name!r} {why}")
    if "\0" in name:
        refuse("holds a NUL byte")
    if name.startswith("/") or "\\" in name:
        refuse("is not a relative path with '/' (it leads out of include/)")
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if not parts:
        refuse("names no file")
    if ".." in parts:
        refuse("leads out of include/")
    return parts


@dataclass
class _Row:
    unit: str
    program: Program
    headers: list[tuple[tuple[str, ...], str]]


def _plan(record: Record, registry: str) -> tuple[list[_Row], dict[tuple[str, ...], str]]:
    """Every row and header file of the table, checked before anything is written: GenError for the first
    problem."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", registry):
        raise errors.GenError(f"--name: a registry name is an identifier, got {registry!r}")
    rows: list[_Row] = []
    units: set[str] = set()
    seen: set[str] = set()
    files: dict[tuple[str, ...], str] = {}  # include/ path -> text
    for p in record.programs:
        digest = hashlib.sha256(repr((p.source, p.headers, p.options, p.kernels)).encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        headers = [(_header_path(p.label, name), text) for name, text in p.headers]
        for parts, text in headers:
            if files.setdefault(parts, text) != text:
                raise errors.GenError(f"program {p.label!r}: header {'/'.join(parts)!r} differs from another "
                                      "program's of that name; include/ can hold one")
        rows.append(_Row(_identifier(p.label or "program", units), p, headers))
    if not rows:
        raise errors.GenError("the record holds no program given at run time: nothing to put in a table")
    for parts in files:  # a header's directory that is another header's file
        for i in range(1, len(parts)):
            if parts[:i] in files:
                raise errors.GenError(f"header {'/'.join(parts)!r} lies under {'/'.join(parts[:i])!r}, another header")
    return rows, files


def _table_text(rows: list[_Row], record: Record, registry: str) -> str:
    lines = [f"# Made by kiln-gen from-record: the programs a run compiled at run time, to embed.",
             "", "[registry]", f"name = {_toml_string(registry)}", 'include_dirs = ["include"]', ""]
    kernel_names: set[str] = set()
    for row in rows:
        p = row.program
        options = [o for o in p.options if not o.startswith(("-I", "--include-path"))]
        dropped = [o for o in p.options if o.startswith(("-I", "--include-path"))]
        kernels = ", ".join(f"{_identifier(e, kernel_names)} = {_toml_string(e)}" for e in p.kernels)
        lines += ["[[unit]]"]
        if dropped:
            lines += [f"# It was compiled with {_comment(' '.join(dropped))}: name those headers' directory in include_dirs."]
        lines += [f"name = {_toml_string(row.unit)}", f"source = {_toml_string('sources/' + row.unit + '.cu')}",
                  f"kernels = {{ {kernels} }}"]
        if options:
            lines += ["options = [" + ", ".join(_toml_string(o) for o in options) + "]"]
        lines += [""]
    if record.kernels:
        lines += ["# Kernels of tables that no embedded binary served (add their architectures to those builds):"]
        for registry_name, kernel, arch in sorted(set(record.kernels)):
            lines += [f"#   {_comment(registry_name)} {_comment(kernel)} sm_{arch}"]
    return "\n".join(lines) + "\n"


_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _subdirectory(parent: int, name: str, shown: str) -> int:
    """The directory `name` in the directory `parent` (made when missing), opened without following a link."""
    try:
        os.mkdir(name, 0o777, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as e:
        why = "a link or not a directory" if e.errno in (errno.ELOOP, errno.ENOTDIR) else e.strerror
        raise errors.GenError(f"{shown}: cannot write into it: {why}") from None


def _replace(directory: int, name: str, text: str, shown: str):
    """`name` in `directory` replaced by `text`: written to a new file beside it (created exclusively, never
    through a link), then renamed over it, so a link planted at `name` is replaced, never written through."""
    data = text.encode("utf-8")
    temp = f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.rename(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            os.unlink(temp, dir_fd=directory)
            raise
    except OSError as e:
        raise errors.GenError(f"{shown}: cannot write it: {e.strerror}") from None


def write_table(record: Record, out: Path, registry: str) -> Path:
    """Writes `out`/<registry>.toml, a source per program under `out`/sources/, its headers under
    `out`/include/; returns the table's path. A program's -I options are dropped: its headers given in
    memory are written out, and other include directories must be named in the table by hand (said in a
    comment on the row). Everything is checked before anything is written; no link under `out` is followed
    (`out` itself may be one)."""
    rows, files = _plan(record, registry)
    table_text = _table_text(rows, record, registry)
    try:
        out.mkdir(parents=True, exist_ok=True)
        root = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise errors.GenError(f"{out}: cannot write into it: {e.strerror}") from None
    opened = [root]
    try:
        sources = _subdirectory(root, "sources", str(out / "sources"))
        opened.append(sources)
        for row in rows:
            _replace(sources, f"{row.unit}.cu", row.program.source, str(out / "sources" / f"{row.unit}.cu"))
        include = _subdirectory(root, "include", str(out / "include"))
        opened.append(include)
        directories: dict[tuple[str, ...], int] = {(): include}
        for parts, text in sorted(files.items()):
            for i in range(1, len(parts)):
                if parts[:i] not in directories:
                    fd = _subdirectory(directories[parts[:i - 1]], parts[i - 1], str(out / "include" / "/".join(parts[:i])))
                    opened.append(fd)
                    directories[parts[:i]] = fd
            _replace(directories[parts[:-1]], parts[-1], text, str(out / "include" / "/".join(parts)))
        _replace(root, f"{registry}.toml", table_text, str(out / f"{registry}.toml"))
    finally:
        for fd in opened:
            os.close(fd)
    return out / f"{registry}.toml"
