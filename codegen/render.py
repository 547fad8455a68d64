"""Rendering: the Jinja2 environment over templates/, and writing outputs only when they change."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"


def environment(*extra_dirs: Path) -> jinja2.Environment:
    # StrictUndefined: a template that names a value the generator did not pass is a bug, not "".
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(TEMPLATE_DIR), *map(str, extra_dirs)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def write_if_different(path: Path, content: str | bytes) -> bool:
    """Write `content` unless the file already holds it, so unchanged outputs keep their timestamps
    and nothing downstream rebuilds. Returns True when the file was written."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    path = Path(path)
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def write_depfile(path: Path, target: str | Path, deps) -> None:
    """A Make-style depfile, as ninja reads it."""
    def esc(p) -> str:
        return str(p).replace(" ", "\\ ")
    lines = [f"{esc(target)}:"] + [f" \\\n  {esc(d)}" for d in deps]
    write_if_different(path, "".join(lines) + "\n")
