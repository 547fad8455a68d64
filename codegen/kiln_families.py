"""kiln's declared families: `family = "kiln.<name>"`, the open families a project's table names
(templates/families/kiln/), and `family = "prim.<name>"`, the fixed-type families of kiln's own primitives
table (templates/families/prim/). Each is a declaration, <name>.toml, that lists the family's parameters
(a default and a pattern where they have one), the include directories its units need, and the kernels
every row exports (`<unit>_<key>` = a name expression over the parameters), so a row needs no `kernels`;
its template is <name>.cu.j2 beside it unless the declaration names another (`template`). A declaration
may instead take the parameters, include directories and kernels of another declared family (`extends`),
changing a parameter's default: kiln's primitives are the open families' kernels for kiln's operators.
A prim.* declaration also names the fixed-type plan of libkiln_prim its rows instantiate (`[plan]`,
read by plan_types.py). Only kiln defines these: the prefixes are looked up in kiln's own folders alone, never in a table's
`template_dirs`."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import errors
import render

PREFIX = "kiln."
DIRECTORY = render.TEMPLATE_DIR / "families" / "kiln"
# prefix -> the folder its declarations are in
FOLDERS = {PREFIX: DIRECTORY, "prim.": render.TEMPLATE_DIR / "families" / "prim"}
_NAME = re.compile(r"[a-z_][a-z0-9_]*")
DECLARATION_FIELDS = ("include_dirs", "params", "kernels", "template", "extends", "plan")
PARAM_FIELDS = ("doc", "default", "pattern")
PLAN_FIELDS = ("class", "args", "unit", "values")
_CLASS = re.compile(r"[A-Z][A-Za-z0-9]*")


@dataclass(frozen=True)
class Param:
    default: str | None       # None: the row must give it
    pattern: re.Pattern | None


@dataclass(frozen=True)
class Plan:
    """The fixed-type plan of libkiln_prim a prim.* family's rows instantiate, one instance per row."""
    cls: str                          # the class template, kiln::prim::<cls>
    args: tuple[str, ...]             # the parameters that name an instance, in the order of X(...)'s arguments
    unit: str                         # the row's name the plan looks its kernels up by: "reduce_{T}"
    values: dict[str, dict[str, str]]  # a parameter that is no type: its row values -> the host's spelling


@dataclass(frozen=True)
class Declaration:
    template: Path
    path: Path                      # the .toml
    include_dirs: tuple[Path, ...]
    params: dict[str, Param]
    kernels: dict[str, str]         # suffix -> name expression
    plan: Plan | None = None        # prim.*: the fixed-type plan its rows are instances of


def prefix_of(family: str) -> str | None:
    return next((p for p in FOLDERS if family.startswith(p)), None)


def is_kiln(family: str) -> bool:
    """Whether `family` names one of kiln's declared families (kiln.* or prim.*)."""
    return prefix_of(family) is not None


def known(prefix: str = PREFIX) -> list[str]:
    return sorted(prefix + p.name[:-len(".toml")] for p in FOLDERS[prefix].glob("*.toml"))


def find(family: str) -> Path | None:
    """The declaration of `kiln.<name>` or `prim.<name>`, or None when kiln has no such family."""
    prefix = prefix_of(family)
    if prefix is None:
        return None
    name = family[len(prefix):]
    path = FOLDERS[prefix] / (name + ".toml")
    return path if _NAME.fullmatch(name) and path.is_file() else None


def load(path: Path, extending: tuple[Path, ...] = ()) -> Declaration:
    """Reads and checks a declaration (and the one it extends); a mistake in it is kiln's, named with its file."""
    def bad(message: str):
        raise errors.GenError(f"{path}: {message}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        bad(f"cannot read the family declaration: {e}")
    unknown = sorted(set(data) - set(DECLARATION_FIELDS))
    if unknown:
        bad(f"unknown field '{unknown[0]}' (expected {', '.join(DECLARATION_FIELDS)})")
    base = None
    if "extends" in data:
        parent = find(data["extends"]) if isinstance(data["extends"], str) else None
        if parent is None or parent in extending or parent == path:
            bad(f"extends {data['extends']!r}: expected another of kiln's declared families")
        if "kernels" in data:
            bad(f"declares kernels and extends {data['extends']}, whose kernels it takes: remove one")
        base = load(parent, extending + (path,))
    include_dirs = (base.include_dirs if base else ()) + tuple((path.parent / d).resolve()
                                                                for d in data.get("include_dirs", []))
    params = dict(base.params) if base else {}
    for name, spec in data.get("params", {}).items():
        if not isinstance(spec, dict) or set(spec) - set(PARAM_FIELDS):
            bad(f"params.{name}: expected a table with {', '.join(PARAM_FIELDS)}")
        pattern = spec.get("pattern")
        inherited = params.get(name)
        params[name] = Param(spec.get("default", inherited.default if inherited else None),
                             re.compile(pattern) if pattern is not None else inherited.pattern if inherited else None)
    kernels = base.kernels if base else data.get("kernels", {})
    if not kernels or not all(isinstance(v, str) and _NAME.fullmatch(k) for k, v in kernels.items()):
        bad("expected [kernels] with one or more suffix = \"name expression\" entries")
    template_name = data.get("template", path.stem + ".cu.j2")
    template = path.parent / template_name if isinstance(template_name, str) else path
    if not isinstance(template_name, str) or not template.is_file():
        bad(f"no template {template_name} beside it")
    plan = load_plan(data["plan"], params, bad) if "plan" in data else None
    return Declaration(template, path, include_dirs, params, dict(kernels), plan)


def load_plan(data, params: dict[str, Param], bad) -> Plan:
    """A declaration's [plan]: the class, the parameters that name an instance (declared ones), the unit
    name pattern over them, and the host's spelling of each parameter that is no type."""
    if not isinstance(data, dict) or set(data) - set(PLAN_FIELDS):
        bad(f"plan: expected a table with {', '.join(PLAN_FIELDS)}")
    cls, args, unit, values = data.get("class"), data.get("args"), data.get("unit"), data.get("values", {})
    if not isinstance(cls, str) or not _CLASS.fullmatch(cls):
        bad(f"plan.class: expected the name of a class template of kiln::prim, got {cls!r}")
    if not isinstance(args, list) or not args or not all(isinstance(a, str) and a in params for a in args):
        bad(f"plan.args: expected a list of the declared parameters ({', '.join(sorted(params))}), got {args!r}")
    if not isinstance(unit, str) or not all(f"{{{a}}}" in unit for a in args):
        bad(f"plan.unit: expected the unit's name with {', '.join(f'{{{a}}}' for a in args)} in it, got {unit!r}")
    if not isinstance(values, dict) or not all(
            k in args and isinstance(v, dict) and v and all(isinstance(x, str) for x in v.values())
            for k, v in values.items()):
        bad("plan.values: expected { Param = { \"row value\" = \"host spelling\", ... } } for parameters in plan.args")
    return Plan(cls, tuple(args), unit, {k: dict(v) for k, v in values.items()})
