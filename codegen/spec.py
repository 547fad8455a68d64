"""The spec table model: reads a kiln spec table (TOML) and validates every row and field.

Errors name the file (with the line of the row where it can be found), the row and the field,
and say what was expected.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox

import bounded
import errors
import kiln_families
import render

# The registry name the runtime gives programs given at run time (runtime/src/program/record.hpp).
RESERVED_REGISTRY = "program"

# Every architecture CUDA 13.0 compiles to SASS (nvcc --list-gpu-code).
KNOWN_ARCHS = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)

# Defines that make CUB's mangled names independent of the architecture list, identical for nvcc and
# NVRTC (see DESIGN.md, "CUB's inline namespace"). Added to every unit, never left to the table.
IMPLICIT_OPTIONS = ("-DCUB_DISABLE_NAMESPACE_MAGIC", "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR")
DEFAULT_STD = "-std=c++17"

# Options both nvcc and NVRTC accept with the same meaning: one description feeds both compilers.
_ALLOWED_OPTIONS = (
    (re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(=.*)?"), "-DNAME or -DNAME=VALUE"),
    (re.compile(r"-U[A-Za-z_][A-Za-z0-9_]*"), "-UNAME"),
    (re.compile(r"-std=c\+\+(17|20)"), "-std=c++17 or -std=c++20"),
    (re.compile(r"-lineinfo"), "-lineinfo"),
    (re.compile(r"--?use_fast_math"), "--use_fast_math"),
    (re.compile(r"--maxrregcount=[0-9]+"), "--maxrregcount=N"),
    (re.compile(r"--(ftz|prec-div|prec-sqrt|fmad)=(true|false)"), "--ftz/--prec-div/--prec-sqrt/--fmad=true|false"),
    (re.compile(r"--extra-device-vectorization"), "--extra-device-vectorization"),
    (re.compile(r"--expt-relaxed-constexpr"), "--expt-relaxed-constexpr"),
    # A diagnostic's number, one per option: nvcc would split a list at its commas.
    (re.compile(r"--diag-(suppress|warn|error)=[0-9]+"), "--diag-suppress/--diag-warn/--diag-error=N"),
)

# nvcc runs its stages through sh, each argument in double quotes (`nvcc --dryrun` shows -D "X=..."), so
# in an argument sh would expand $ and backquotes, nvcc itself drops backslashes, and nvcc splits the values
# of -D and -I at commas; NVRTC takes every option as written. What kiln hands nvcc must contain none of
# these, so that it runs nothing and means the same to both compilers.
_SHELL_EXPANDED = ("$", "`", "\\")
_SPLIT_BY_NVCC = ","


def nvcc_unsafe(argument: str, split_at_commas: bool = True) -> str | None:
    """Why nvcc would not take `argument` as NVRTC does (or would run part of it), or None."""
    for ch in _SHELL_EXPANDED:
        if ch in argument:
            return f"it contains {ch!r}, which the shell nvcc runs its stages with would expand or drop"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in argument):
        return "it contains a control character"
    if split_at_commas and _SPLIT_BY_NVCC in argument:
        return "it contains ',', at which nvcc splits the value into several (NVRTC does not)"
    return None


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAMESPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*")
_ARCH = re.compile(r"sm_([0-9]+)")
KERNELS_KEY = re.compile(r"\s*kernels\s*=")

# The catalog header declares a handle per kernel name (kernels::NAME): none may be a C++ keyword.
CPP_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if
inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public
register reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq""".split())

REGISTRY_FIELDS = ("name", "namespace", "options", "include_dirs", "template_dirs")
UNIT_FIELDS = ("name", "source", "family", "params", "kernels", "options", "archs", "jit_only", "linked")
# What a linked unit's options gain: its kernels call a function defined elsewhere (docs/DESIGN.md,
# "Operators at run time"), which NVRTC accepts only in relocatable device code.
LINKED_OPTIONS = ("-rdc=true",)

# kiln's own families; a table adds its own directories with `template_dirs`.
BUILTIN_FAMILY_DIR = render.TEMPLATE_DIR / "families"
FAMILY_SUFFIX = ".cu.j2"


class SpecError(errors.GenError):
    """A spec table mistake, already formatted as `file[:line]: row: field 'x': what was expected`."""


@dataclass(frozen=True)
class Kernel:
    name: str        # registry name, what get() takes
    expression: str  # C++ name expression, rendered with the unit's params


@dataclass(frozen=True)
class Unit:
    name: str
    row: int                 # 1-based index among the table's [[unit]] rows
    line: int | None         # line of its [[unit]] header, when it can be found
    kernels: tuple[Kernel, ...]
    options: tuple[str, ...]  # full option list: registry options, unit options, implicit defines
    archs: tuple[int, ...]    # SM numbers to build cubins for
    ptx_arch: int | None      # SM number to embed PTX for, or None
    include_dirs: tuple[Path, ...]
    lower_arch: int = 0          # the architecture NVRTC names the kernels for at build time: the lowest
    kernels_line: int = 1        # the line of the row's `kernels` in the table, for errors in name expressions
    jit_only: bool = False       # compiled by the JIT tier only: nvcc builds no cubin of it (archs is empty)
    linked: bool = False         # its kernels call code given at run time (Registry::get with a LinkedSource): jit_only
    lto_archs: tuple[int, ...] = ()  # a linked unit's: architectures to embed its LTO-IR for (nvcc -dlto),
                                     # which the run time links with the code given (docs/DESIGN.md,
                                     # "Operators at run time")
    source: Path | None = None   # a hand-written .cu file
    family: str | None = None    # or a template family ...
    family_path: Path | None = None
    params: dict = field(default_factory=dict)  # ... with its parameters
    family_declaration: Path | None = None  # a kiln.* family's declaration (its kernels and parameters)

    @property
    def targets(self) -> tuple[str, ...]:
        """What the unit compiles to, in the order of its binaries: sm_XX per arch, then compute_XX (PTX),
        then a linked unit's lto_XX (LTO-IR) per arch."""
        ptx = (arch_label(self.ptx_arch, "compute"),) if self.ptx_arch is not None else ()
        return (tuple(arch_label(a) for a in self.archs) + ptx +
                tuple(arch_label(a, "lto") for a in self.lto_archs))


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    namespace: str
    units: tuple[Unit, ...]
    template_dirs: tuple[Path, ...]

    def unit(self, name: str) -> Unit:
        for u in self.units:
            if u.name == name:
                return u
        raise SpecError(f"{self.path}: no unit named '{name}' (units: {', '.join(u.name for u in self.units)})")


TARGET_KINDS = ("sm", "compute", "lto")  # a cubin, PTX, LTO-IR


def arch_label(arch: int, kind: str = "sm") -> str:
    return f"{kind}_{arch}"


def parse_target(label: str) -> tuple[int, str]:
    """The inverse of arch_label: "sm_90" -> (90, "sm"), "compute_90" -> (90, "compute"), "lto_90" ->
    (90, "lto")."""
    kind, _, arch = label.partition("_")
    if kind not in TARGET_KINDS:
        raise ValueError(f"not a target: {label!r}")
    return int(arch), kind


def unit_where(path: Path, row: int, line: int | None, name: str | None = None) -> str:
    """How every message names a [[unit]] row: `file[:line]: unit #row 'name'`."""
    line_part = f":{line}" if line else ""
    name_part = f" '{name}'" if name else ""
    return f"{path}{line_part}: unit #{row}{name_part}"


def parse_archs(values, where: str) -> tuple[int, ...]:
    """['sm_90', ...] -> (90, ...), in ascending order, rejecting unknown or repeated ones."""
    if not isinstance(values, list) or not values:
        raise SpecError(f"{where}: expected a non-empty list of architectures like [\"sm_80\", \"sm_90\"]")
    archs = []
    for v in values:
        m = _ARCH.fullmatch(v) if isinstance(v, str) else None
        if not m or int(m.group(1)) not in KNOWN_ARCHS:
            known = ", ".join(arch_label(a) for a in KNOWN_ARCHS)
            raise SpecError(f"{where}: {v!r} is not an architecture CUDA 13.0 builds SASS for ({known})")
        if int(m.group(1)) in archs:
            raise SpecError(f"{where}: {v!r} is listed twice")
        archs.append(int(m.group(1)))
    return tuple(sorted(archs))


def load(path: str | Path, archs: tuple[int, ...], embed_ptx: bool, jit_only: bool = False) -> Spec:
    """Read and validate the table at `path` for the build's architectures. `jit_only`: every unit is
    JIT-only (nothing embedded), whatever its row says; the architectures then only name the kernels."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"{path}: cannot read the spec table: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: the spec table is not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise SpecError(f"{path}: not valid TOML for kiln: its arrays or inline tables nest too deeply") from None
    return _Validator(path, text, archs, embed_ptx, jit_only).spec(data)


class _Validator:
    def __init__(self, path: Path, text: str, archs: tuple[int, ...], embed_ptx: bool, jit_only: bool = False):
        self.path = path
        self.all_jit_only = jit_only
        self.base = path.resolve().parent
        self.archs = archs
        self.embed_ptx = embed_ptx
        # Kernel expressions are table text: rendered in Jinja2's sandbox, so that they reach no Python
        # internals (`{{ cycler.__init__.__globals__.os }}`), with one environment for every row.
        self.expressions = render.sandbox()
        self.parsed: set[str] = set()  # expressions checked; rows of a family share their expressions' text
        # Expressions to render, all in one bounded run once every row is read (bounded.py):
        # {(expression, params): [(row, kernel's position, where, kernel name)]}.
        self.to_render: dict[tuple, list[tuple[int, int, str, str]]] = {}
        self.family_params = {}  # family template path -> the parameters it takes, parsed once
        self.declarations = {}   # kiln family declaration path -> kiln_families.Declaration, read once
        self.sources_read: set[Path] = set()  # sources already checked
        # Lines of the [[unit]] headers, so errors can point at the row.
        self.lines = text.splitlines()
        self.unit_lines = [i + 1 for i, line in enumerate(self.lines)
                           if re.match(r"\s*\[\[\s*unit\s*\]\]", line)]

    def fail(self, where: str, message: str):
        raise SpecError(f"{where}: {message}")

    # -- [registry] ------------------------------------------------------------------------------

    def spec(self, data: dict) -> Spec:
        unknown = sorted(set(data) - {"registry", "unit"})
        if unknown:
            self.fail(str(self.path), f"unknown top-level key '{unknown[0]}' (expected [registry] and [[unit]] rows)")
        reg = data.get("registry")
        where = f"{self.path}: [registry]"
        if not isinstance(reg, dict):
            self.fail(str(self.path), "missing [registry] table (with at least `name = \"...\"`)")
        self.check_fields(reg, REGISTRY_FIELDS, where)
        name = self.identifier(reg, "name", where, required=True)
        if name == RESERVED_REGISTRY:
            self.fail(f"{where}: field 'name'", f"'{RESERVED_REGISTRY}' is the registry of programs given at run "
                      "time (kiln/program.hpp): name the table otherwise")
        namespace = reg.get("namespace", name)
        if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
            self.fail(f"{where}: field 'namespace'", f"expected a C++ namespace like \"myproject::kernels\", got {namespace!r}")
        self.registry_options = self.options(reg, where)
        self.include_dirs = tuple(self.directory(d, f"{where}: field 'include_dirs'")
                                  for d in self.string_list(reg, "include_dirs", where))
        self.template_dirs = tuple(self.directory(d, f"{where}: field 'template_dirs'")
                                   for d in self.string_list(reg, "template_dirs", where)) + (BUILTIN_FAMILY_DIR,)
        rows = data.get("unit")
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
            self.fail(str(self.path), "expected one or more [[unit]] rows")
        units = []
        taken: set[str] = set()  # unit names so far, kept as rows come (not rebuilt per row: 100,000 rows)
        kernel_rows: dict[str, str] = {}
        for i, row in enumerate(rows, start=1):
            unit = self.unit(row, i, taken)
            taken.add(unit.name)
            for k in unit.kernels:
                if k.name in kernel_rows:
                    self.fail(f"{self.where(i, unit.name)}: field 'kernels'",
                              f"kernel name '{k.name}' is already exported by {kernel_rows[k.name]}")
                kernel_rows[k.name] = f"unit '{unit.name}'"
            units.append(unit)
        return Spec(self.path, name, namespace, self.rendered(units), self.template_dirs)

    # -- [[unit]] --------------------------------------------------------------------------------

    def line(self, row: int) -> int | None:
        return self.unit_lines[row - 1] if row <= len(self.unit_lines) else None

    def kernels_line(self, row: int) -> int:
        """The line of the row's `kernels = ...` (else of the row, else 1)."""
        start = self.line(row)
        if start is None:
            return 1
        end = self.unit_lines[row] if row < len(self.unit_lines) else len(self.lines) + 1
        return next((n for n in range(start, end) if KERNELS_KEY.match(self.lines[n - 1])), start)

    def where(self, row: int, name: str | None = None) -> str:
        return unit_where(self.path, row, self.line(row), name)

    def unit(self, row: dict, index: int, taken: set[str]) -> Unit:
        raw_name = row.get("name")
        where = self.where(index, raw_name if isinstance(raw_name, str) else None)
        self.check_fields(row, UNIT_FIELDS, where)
        name = self.identifier(row, "name", where, required=True)
        if name in taken:
            self.fail(f"{where}: field 'name'", f"unit name '{name}' is used by an earlier row")
        has_source, has_family = "source" in row, "family" in row
        if has_source == has_family:
            self.fail(where, "expected exactly one of 'source' (a .cu file) or 'family' (a template family)")
        source = family = family_path = declaration = None
        params: dict = {}
        include_dirs = list(self.include_dirs)
        if has_source:
            if "params" in row:
                self.fail(f"{where}: field 'params'", "params are only allowed with 'family', not with 'source'")
            source = self.source_file(row["source"], f"{where}: field 'source'")
            include_dirs.insert(0, source.resolve().parent)  # where its own includes are, links followed
        else:
            family, family_path, params, declaration = self.family(row, where)
        jit_only = self.flag(row, "jit_only", where, "a jit_only unit has no binaries to build for architectures")
        linked = self.flag(row, "linked", where, "a linked unit's LTO-IR is built for the table's archs, and linked "
                                                 "with its code at run time")
        archs = parse_archs(row["archs"], f"{where}: field 'archs'") if "archs" in row else self.archs
        # A linked row ships its kernels as LTO-IR for the build's archs, unless nothing is built ahead
        # of time (the row's jit_only, or the whole table's).
        lto_archs = archs if linked and not jit_only and not self.all_jit_only else ()
        jit_only = jit_only or linked or self.all_jit_only
        kernels_field = row.get("kernels")
        if declaration is not None:
            declared = [f"{name}_{suffix}" for suffix in declaration.kernels]
            if "kernels" in row:
                self.fail(f"{where}: field 'kernels'", f"family '{family}' declares its kernels "
                                                       f"({', '.join(declared)}): remove 'kernels'")
            include_dirs += declaration.include_dirs
            kernels_field = dict(zip(declared, declaration.kernels.values()))
        kernels = self.kernels(kernels_field, params, f"{where}: field 'kernels'", index)
        options = self.registry_options + self.options(row, where) + (LINKED_OPTIONS if linked else ())
        if not any(o.startswith("-std=") for o in options):
            options = (DEFAULT_STD,) + options
        return Unit(
            name=name, row=index,
            line=self.line(index),
            kernels=kernels, options=options + IMPLICIT_OPTIONS, archs=() if jit_only else archs,
            ptx_arch=max(archs) if self.embed_ptx and not jit_only else None,
            include_dirs=tuple(dict.fromkeys(include_dirs)),
            lower_arch=min(archs), kernels_line=self.kernels_line(index), jit_only=jit_only, linked=linked,
            lto_archs=lto_archs,
            source=source, family=family, family_path=family_path, params=params,
            family_declaration=declaration.path if declaration is not None else None)

    def flag(self, row: dict, field: str, where: str, why_no_archs: str) -> bool:
        """A boolean field whose unit builds nothing for archs of its own (no cubin; a linked unit's LTO-IR
        for the table's archs), so excludes 'archs'."""
        value = row.get(field, False)
        if not isinstance(value, bool):
            self.fail(f"{where}: field '{field}'", f"expected true or false, got {value!r}")
        if value and "archs" in row:
            self.fail(f"{where}: field 'archs'", f"{why_no_archs}; remove 'archs' or '{field}'")
        return value

    def family(self, row: dict, where: str):
        family = row["family"]
        if isinstance(family, str) and kiln_families.is_kiln(family):
            return self.kiln_family(row, family, where)
        if not isinstance(family, str) or not _IDENTIFIER.fullmatch(family):
            self.fail(f"{where}: field 'family'", f"expected the name of a template family, got {family!r}")
        path = next((d / (family + FAMILY_SUFFIX) for d in self.template_dirs
                     if (d / (family + FAMILY_SUFFIX)).is_file()), None)
        if path is None:
            known = sorted({p.name[:-len(FAMILY_SUFFIX)] for d in self.template_dirs if d.is_dir()
                            for p in d.glob("*" + FAMILY_SUFFIX)})
            self.fail(f"{where}: field 'family'",
                      f"unknown family '{family}' (known: {', '.join(known) or 'none'}; "
                      f"searched {', '.join(str(d) for d in self.template_dirs)})")
        params = row.get("params", {})
        if not isinstance(params, dict):
            self.fail(f"{where}: field 'params'", "expected a table like { T = \"float\", BLOCK_THREADS = 256 }")
        if path not in self.family_params:
            self.family_params[path] = family_params(path, where)
        wanted = self.family_params[path]
        for key, value in params.items():
            if key not in wanted:
                self.fail(f"{where}: field 'params'",
                          f"parameter '{key}' is not allowed: family '{family}' takes {', '.join(sorted(wanted))}")
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                self.fail(f"{where}: field 'params'", f"parameter '{key}' must be a string or a number, got {value!r}")
        missing = sorted(wanted - set(params))
        if missing:
            self.fail(f"{where}: field 'params'", f"family '{family}' needs {', '.join(missing)}")
        return family, path, dict(sorted(params.items())), None

    def kiln_family(self, row: dict, family: str, where: str):
        """A family of kiln's own (kiln_families): its parameters checked against its declaration, defaults
        filled in; the declaration comes back too, for the row's kernels and include directories."""
        path = kiln_families.find(family)
        if path is None:
            prefix = kiln_families.prefix_of(family)
            self.fail(f"{where}: field 'family'", f"unknown family '{family}': the '{prefix}' prefix is kiln's own "
                                                  f"(kiln's: {', '.join(kiln_families.known(prefix))})")
        if path not in self.declarations:
            try:
                self.declarations[path] = kiln_families.load(path)
            except errors.GenError as e:
                self.fail(f"{where}: field 'family'", str(e))
        declaration = self.declarations[path]
        template = declaration.template
        if template not in self.family_params:
            self.family_params[template] = family_params(template, where)
        wanted = self.family_params[template]
        if not wanted <= set(declaration.params):  # a parameter may be used only by the kernels
            self.fail(f"{where}: field 'family'", f"{path}: declares {', '.join(sorted(declaration.params))} "
                                                  f"but {template.name} uses {', '.join(sorted(wanted))}")
        wanted = set(declaration.params)
        params = row.get("params", {})
        if not isinstance(params, dict):
            self.fail(f"{where}: field 'params'", "expected a table like { T = \"float\", Op = \"::cuda::maximum<>\" }")
        for key, value in params.items():
            if key not in wanted:
                self.fail(f"{where}: field 'params'",
                          f"parameter '{key}' is not allowed: family '{family}' takes {', '.join(sorted(wanted))}")
            if not isinstance(value, str) or not value.strip():
                self.fail(f"{where}: field 'params'", f"parameter '{key}' must be a C++ type as a string, got {value!r}")
            pattern = declaration.params[key].pattern
            if pattern is not None and not pattern.fullmatch(value):
                self.fail(f"{where}: field 'params'", f"parameter '{key}' = {value!r} does not match {pattern.pattern!r}")
        missing = sorted(k for k in wanted if k not in params and declaration.params[k].default is None)
        if missing:
            self.fail(f"{where}: field 'params'", f"family '{family}' needs {', '.join(missing)}")
        full = {k: params.get(k, declaration.params[k].default) for k in wanted}
        return family, template, dict(sorted(full.items())), declaration

    def kernels(self, value, params: dict, where: str, row: int) -> tuple[Kernel, ...]:
        """The row's kernels; an expression with Jinja2 syntax is parsed here (its syntax checked) and
        compiled and rendered with the others by `rendered`."""
        if isinstance(value, list) and value:
            pairs = []
            for v in value:
                if not isinstance(v, str) or not _IDENTIFIER.fullmatch(v):
                    self.fail(where, f"{v!r} is not a plain kernel name; for a template use a table, "
                                     "e.g. { scale_f32 = \"scale<float>\" }")
                pairs.append((v, v))
        elif isinstance(value, dict) and value:
            pairs = list(value.items())
        else:
            self.fail(where, "expected a non-empty list of extern \"C\" kernel names, or a table "
                             "{ registry_name = \"C++ name expression\" }")
        kernels = []
        for name, expr in pairs:
            if not _IDENTIFIER.fullmatch(name):
                self.fail(where, f"kernel name {name!r} must be an identifier")
            if name in CPP_KEYWORDS:
                self.fail(where, f"kernel name {name!r} is a C++ keyword; the catalog header declares a handle "
                                 f"of that name (kernels::{name}): choose another")
            if not isinstance(expr, str) or not expr.strip():
                self.fail(where, f"kernel '{name}': expected a C++ name expression string, got {expr!r}")
            if "{" in expr:  # Jinja2 syntax: rendered once every row is read
                self.parse_expression(expr, f"{where}: kernel '{name}'")
                key = (expr, tuple(sorted(params.items())))
                self.to_render.setdefault(key, []).append((row, len(kernels), where, name))
            kernels.append(Kernel(name, " ".join(expr.split())))
        return tuple(kernels)

    def parse_expression(self, expr: str, where: str) -> None:
        """Parse a name expression once, refusing what would load another template: an expression is
        rendered alone, with its row's params. Not compiled here: Jinja2 computes constant parts while
        compiling (`{{ 10 ** (10 ** 10) }}`), so compiling is bounded too (`rendered`)."""
        if expr in self.parsed:
            return
        try:
            tree = self.expressions.parse(expr)
            for node in tree.find_all((jinja2.nodes.Include, jinja2.nodes.Import, jinja2.nodes.FromImport,
                                       jinja2.nodes.Extends)):
                tag = {"FromImport": "from ... import", "Include": "include", "Import": "import",
                       "Extends": "extends"}[type(node).__name__]
                self.fail(where, f"cannot render {expr!r}: {{% {tag} %}} is not allowed in a name expression, "
                                 f"which is rendered alone with its row's params (a family's template may use it)")
            self.parsed.add(expr)
        except jinja2.TemplateError as e:
            self.fail(where, f"cannot render {expr!r}: {one_line(e)}")
        except (RecursionError, MemoryError):
            self.fail(where, f"cannot render {expr!r}: it nests too deeply")

    def rendered(self, units: list[Unit]) -> tuple[Unit, ...]:
        """`units` with their name expressions rendered, all in one run bounded in time, memory and
        length (bounded.py); the first that fails is the error, naming its row and kernel."""
        keys = list(self.to_render)
        compiled: dict[str, jinja2.Template] = {}  # filled in the child that renders them
        jobs = [functools.partial(render_expression, self.expressions, compiled, expr, dict(params))
                for expr, params in keys]
        try:
            texts = bounded.run(jobs, bounded.EXPRESSION_CHARS, one_line)
        except bounded.Failed as e:
            expr = keys[e.index][0]
            _, _, where, name = self.to_render[keys[e.index]][0]
            self.fail(where, f"kernel '{name}': cannot render {expr!r}: {one_line(e)}")
        kernels: dict[int, list[Kernel]] = {}  # {row: its kernels}, of rows with a rendered expression
        for key, text in zip(keys, texts):
            for row, position, _, name in self.to_render[key]:
                kernels.setdefault(row, list(units[row - 1].kernels))[position] = Kernel(name, " ".join(text.split()))
        return tuple(dataclasses.replace(u, kernels=tuple(kernels[u.row])) if u.row in kernels else u for u in units)

    # -- field helpers ---------------------------------------------------------------------------

    def check_fields(self, table: dict, known: tuple[str, ...], where: str):
        for key in table:
            if key not in known:
                self.fail(f"{where}: field '{key}'", f"unknown field (known fields: {', '.join(known)})")

    def identifier(self, table: dict, key: str, where: str, required: bool = False):
        if key not in table:
            if required:
                self.fail(f"{where}: field '{key}'", "missing (expected an identifier like \"my_kernel\")")
            return None
        value = table[key]
        if not isinstance(value, str) or not _IDENTIFIER.fullmatch(value):
            self.fail(f"{where}: field '{key}'", f"expected an identifier (letters, digits, _), got {value!r}")
        return value

    def string_list(self, table: dict, key: str, where: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(f"{where}: field '{key}'", f"expected a list of strings, got {value!r}")
        return tuple(value)

    def options(self, table: dict, where: str) -> tuple[str, ...]:
        opts = self.string_list(table, "options", where)
        for o in opts:
            if not any(rx.fullmatch(o) for rx, _ in _ALLOWED_OPTIONS):
                allowed = "; ".join(desc for _, desc in _ALLOWED_OPTIONS)
                self.fail(f"{where}: field 'options'",
                          f"option {o!r} is not one kiln passes to both nvcc and NVRTC (allowed: {allowed})")
            if why := nvcc_unsafe(o):
                self.fail(f"{where}: field 'options'",
                          f"option {o!r} would not mean the same to nvcc as to NVRTC: {why}")
        return opts

    def directory(self, value: str, where: str) -> Path:
        try:
            p = (self.base / value).resolve()
            is_dir = p.is_dir()
        except (OSError, ValueError) as e:  # a NUL, a name too long, a loop of links
            self.fail(where, f"{value!r} is not a directory one can open: {path_error(e)}")
        if not is_dir:
            self.fail(where, f"{value!r} is not a directory (relative to {self.base})")
        if why := nvcc_unsafe(str(p)):
            self.fail(where, f"{value!r} ({p}) cannot be handed to nvcc as an include directory: {why}")
        return p

    def source_file(self, value, where: str) -> Path:
        """The source as a path inside the table's directory tree, checked readable as UTF-8 text.

        Only there: the generated translation unit names its source relative to the table (`#line`), so
        that the unit's text, digest and cache key are the same wherever the project is checked out; a
        file elsewhere is reached through an include directory and a small source in the tree, or a family.
        The check is on the path as written (`..` resolved) and on the file it leads to (links followed): a
        link in the tree that leads out of it is refused like `../x.cu`, since the generator and the
        compilers read the file it leads to."""
        if not isinstance(value, str) or not value:
            self.fail(where, f"expected the path of a .cu file relative to the table, got {value!r}")
        if "\0" in value:
            self.fail(where, f"{value!r} contains a NUL character, which no path may contain")
        if Path(value).is_absolute():
            self.fail(where, f"{value!r} is an absolute path, outside the table's directory tree: give the path "
                             f"relative to the table's directory {self.base} (a source must lie in that tree)")
        p = Path(os.path.normpath(self.base / value))
        if not p.is_relative_to(self.base):
            self.fail(where, f"{value!r} is outside the table's directory {self.base}: a source must lie in "
                             "the table's directory tree; move it there, or #include it from a source that does")
        if p in self.sources_read:  # rows sharing a source: checked once
            return p
        try:
            target = p.resolve()
        except (OSError, RuntimeError) as e:  # a loop of links (RuntimeError before Python 3.13)
            self.fail(where, f"cannot read {value!r} ({p}): {path_error(e)}")
        if not target.is_relative_to(self.base):
            self.fail(where, f"{value!r} is a link to {target}, outside the table's directory {self.base}: a "
                             "source must lie in the table's directory tree; move it there, or #include it from "
                             "a source that does")
        if why := nvcc_unsafe(str(target.parent)):
            self.fail(where, f"{value!r}: its directory cannot be handed to nvcc as an include directory: {why}")
        try:
            p.read_text(encoding="utf-8")  # as the generator and NVRTC will read it
        except OSError as e:
            self.fail(where, f"cannot read {value!r} ({p}): {e.strerror}")
        except UnicodeDecodeError as e:
            self.fail(where, f"{value!r} ({p}) is not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r})")
        self.sources_read.add(p)
        return p


def family_params(path: Path, where: str) -> set[str]:
    """The parameters a family takes: the variables its template uses (parsed, not run). A template that
    does not parse is the table's mistake: named with the file and line Jinja2 stopped at."""
    try:
        text = path.read_text(encoding="utf-8")
        return set(jinja2.meta.find_undeclared_variables(render.sandbox().parse(text, filename=str(path))))
    except jinja2.TemplateSyntaxError as e:
        raise SpecError(f"{where}: field 'family': {template_error(e, path)}") from None
    except (RecursionError, MemoryError):
        raise SpecError(f"{where}: field 'family': {path}: the template nests too deeply") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{where}: field 'family': cannot read {path}: {e}") from None


def render_expression(env: jinja2.Environment, compiled: dict, expr: str, params: dict) -> str:
    if expr not in compiled:
        compiled[expr] = env.from_string(expr)
    return compiled[expr].render(params)


def path_error(e: BaseException) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else one_line(e)


def one_line(e: BaseException) -> str:
    """An error's message on one line (a template's own words, without Python's traceback)."""
    text = " ".join(str(e).split())
    return text if isinstance(e, (jinja2.TemplateError, bounded.Failed)) else f"{type(e).__name__}: {text}"


def template_error(e: jinja2.TemplateError, path: Path) -> str:
    """`file:line: message` for a Jinja2 error in a family (or a template it includes)."""
    if isinstance(e, jinja2.TemplateSyntaxError):
        return f"{e.filename or path}:{e.lineno}: template syntax error: {e.message}"
    return f"{path}: {e}"
