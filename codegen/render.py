"""Rendering and the generator's files: the Jinja2 environment over templates/, writing outputs only
when they change (text, JSON, depfiles), and reading back what an earlier step wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jinja2
import jinja2.sandbox

CODEGEN_DIR = Path(__file__).resolve().parent
TEMPLATE_DIR = CODEGEN_DIR.parent / "templates"
# The generator's own sources: an input of every output (a change to them may change any of them).
CODEGEN_FILES = sorted(str(p) for p in CODEGEN_DIR.glob("*.py"))


@jinja2.pass_context
def _at_render_time(_context, value):
    """The identity, but taking the context: Jinja2 then folds no output at compile time."""
    return value


class _TableSandbox(jinja2.sandbox.SandboxedEnvironment):
    """A sandbox that evaluates nothing of a template while compiling it. Jinja2 folds constant
    expressions when it compiles (its optimizer, and each output's constants), in the process that
    compiles: `{{ 'a' * 10**11 }}` would build 100 GB there, outside the bounds the rendering child has
    (bounded.py), and hang a machine with that much memory. Operators are left to run time (the
    sandbox's call_binop, which applies them), the optimizer is off, and output is finalized at run time."""

    intercepted_binops = frozenset(jinja2.sandbox.SandboxedEnvironment.default_binop_table)
    intercepted_unops = frozenset(jinja2.sandbox.SandboxedEnvironment.default_unop_table)

    def __init__(self, **options):
        super().__init__(optimized=False, finalize=_at_render_time, **options)


def environment(*extra_dirs: Path) -> jinja2.Environment:
    """The environment every template is rendered in: kiln's own, and a table's families. Sandboxed,
    because a family is a table's text: `{{ cycler.__init__.__globals__.os.system(...) }}` must not reach
    Python. StrictUndefined: a template that names a value the generator did not pass is a bug, not ""."""
    return _TableSandbox(
        loader=jinja2.FileSystemLoader([str(TEMPLATE_DIR), *map(str, extra_dirs)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def sandbox() -> jinja2.Environment:
    """The sandboxed environment for short templates from a table (kernel name expressions)."""
    return _TableSandbox(undefined=jinja2.StrictUndefined)


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


def write_json(path: Path, value) -> bool:
    """`write_if_different` of `value` as indented JSON: the form of every JSON file the steps write."""
    return write_if_different(path, json.dumps(value, indent=1) + "\n")


def read_json(path: str | Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_depfile(path: Path, target: str | Path, deps) -> None:
    """A Make-style depfile, as ninja reads it."""
    def esc(p) -> str:
        return str(p).replace(" ", "\\ ")
    lines = [f"{esc(target)}:"] + [f" \\\n  {esc(d)}" for d in deps]
    write_if_different(path, "".join(lines) + "\n")


def depfile_inputs(path: Path) -> list[str]:
    """The prerequisites of a Make-style depfile (ours, or nvcc -MD's), in order."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    _, _, deps = text.partition(": ")
    out, cur, escaped = [], "", False
    for ch in deps:
        if escaped:
            cur, escaped = cur + ch, False
        elif ch == "\\":
            escaped = True
        elif ch.isspace():
            if cur:
                out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return out
