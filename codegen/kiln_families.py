"""kiln's open families (`family = "kiln.<name>"`): templates/families/kiln/<name>.cu.j2 with a declaration
beside it, <name>.toml, that lists the family's parameters (a default and a pattern where they have one),
the include directories its units need, and the kernels every row exports (`<unit>_<key>` = a name
expression over the parameters), so a row needs no `kernels`. Only kiln defines these: the `kiln.` prefix
is looked up in kiln's own folder alone, never in a table's `template_dirs`."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import errors
import render

PREFIX = "kiln."
DIRECTORY = render.TEMPLATE_DIR / "families" / "kiln"
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
DECLARATION_FIELDS = ("include_dirs", "params", "kernels")
PARAM_FIELDS = ("doc", "default", "pattern")


@dataclass(frozen=True)
class Param:
    default: str | None       # None: the row must give it
    pattern: re.Pattern | None


@dataclass(frozen=True)
class Declaration:
    template: Path
    path: Path                      # the .toml
    include_dirs: tuple[Path, ...]
    params: dict[str, Param]
    kernels: dict[str, str]         # suffix -> name expression


def is_kiln(family: str) -> bool:
    return family.startswith(PREFIX)


def known() -> list[str]:
    return sorted(PREFIX + p.name[:-len(".toml")] for p in DIRECTORY.glob("*.toml"))


def find(family: str) -> Path | None:
    """The declaration of `kiln.<name>`, or None when kiln has no such family."""
    name = family[len(PREFIX):]
    path = DIRECTORY / (name + ".toml")
    return path if _NAME.fullmatch(name) and path.is_file() else None


def load(path: Path) -> Declaration:
    """Reads and checks a declaration; a mistake in it is kiln's, named with its file."""
    def bad(message: str):
        raise errors.GenError(f"{path}: {message}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        bad(f"cannot read the family declaration: {e}")
    unknown = sorted(set(data) - set(DECLARATION_FIELDS))
    if unknown:
        bad(f"unknown field '{unknown[0]}' (expected {', '.join(DECLARATION_FIELDS)})")
    include_dirs = tuple((path.parent / d).resolve() for d in data.get("include_dirs", []))
    params = {}
    for name, spec in data.get("params", {}).items():
        if not isinstance(spec, dict) or set(spec) - set(PARAM_FIELDS):
            bad(f"params.{name}: expected a table with {', '.join(PARAM_FIELDS)}")
        pattern = spec.get("pattern")
        params[name] = Param(spec.get("default"), re.compile(pattern) if pattern is not None else None)
    kernels = data.get("kernels", {})
    if not kernels or not all(isinstance(v, str) and _NAME.fullmatch(k) for k, v in kernels.items()):
        bad("expected [kernels] with one or more suffix = \"name expression\" entries")
    template = path.parent / (path.stem + ".cu.j2")
    if not template.is_file():
        bad(f"no template {template.name} beside it")
    return Declaration(template, path, include_dirs, params, dict(kernels))
