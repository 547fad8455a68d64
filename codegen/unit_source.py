"""A unit as the build steps see it: its translation unit rendered from the table, the JSON description
the later steps compile and name it from, and the name of every file it has in the work directory."""

from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path

import jinja2

import bounded
import errors
import render
import spec as specmod


def file_stem(registry: str, unit: str) -> str:
    return f"{registry}.{unit}"


def source_name(registry: str, unit: str) -> str:
    """The rendered translation unit's file name, which is also the name NVRTC gives the source: at
    build time (the lower step compiles the file) and at run time (the catalog carries it)."""
    return f"{file_stem(registry, unit)}.cu"


def binary_name(registry: str, unit: str, target: str) -> str:
    suffix = {"sm": "cubin", "compute": "ptx", "lto": "ltoir"}[specmod.parse_target(target)[1]]
    return f"{file_stem(registry, unit)}.{target}.{suffix}"


@dataclass(frozen=True)
class UnitFiles:
    """A unit's files in a work directory, named here once for every step that writes or reads them."""
    directory: Path
    registry: str
    unit: str

    def _path(self, suffix: str) -> Path:
        return self.directory / f"{file_stem(self.registry, self.unit)}{suffix}"

    @property
    def source(self) -> Path:  # the rendered translation unit
        return self.directory / source_name(self.registry, self.unit)

    @property
    def description(self) -> Path:  # unit_description, as JSON
        return self._path(".json")

    @property
    def names(self) -> Path:  # {name expression: lowered name}, from NVRTC
        return self._path(".names.json")

    @property
    def types(self) -> Path:  # {name expression: the kernel's type, e.g. "void(float*, int)", or null}
        return self._path(".types.json")

    @property
    def stamp(self) -> Path:  # what the unit's outputs were built from (table_build.py)
        return self._path(".stamp")

    def binary(self, target: str) -> Path:
        return self.directory / binary_name(self.registry, self.unit, target)

    def headers(self, target: str) -> Path:  # the headers nvcc read for the target, and the unit's digest
        return Path(f"{self.binary(target)}.headers.json")

    @property
    def jit_headers(self) -> Path:  # a JIT-only unit's: the headers nvcc's preprocessor read, and its digest
        return self._path(".headers.json")

    @property
    def jit_depfile(self) -> Path:  # a JIT-only unit's: nvcc's preprocessor's dependency output
        return self._path(".d")

    def listed(self, targets) -> Path:
        """The list of headers the unit's digest and bundle come from: its first target's, or a JIT-only
        unit's own."""
        return self.headers(targets[0]) if targets else self.jit_headers

    @property
    def bundle(self) -> Path:  # the headers the JIT tier gets, as the lower step checked them
        return self._path(".bundle.json")

    def compile_depfile(self, target: str) -> Path:
        return Path(f"{self.binary(target)}.d")

    def fatbin(self, kind: str) -> Path:  # one fatbin per kind of target: cubins, PTX, LTO-IR (fatbin.py)
        return self._path({"sm": ".fatbin", "compute": ".ptx.fatbin", "lto": ".ltoir.fatbin"}[kind])

    def fatbins(self, targets: list[str]) -> list[Path]:
        """The unit's fatbins for `targets`, in the order the catalog embeds them: cubins', PTX's, LTO-IR's."""
        kinds = {specmod.parse_target(t)[1] for t in targets}
        return [self.fatbin(kind) for kind in specmod.TARGET_KINDS if kind in kinds]

    def fatbin_kind(self, path: Path) -> str:
        """The kind of target `path`, one of the unit's fatbins, holds."""
        return next(kind for kind in specmod.TARGET_KINDS if self.fatbin(kind) == path)


def unit_body(spec: specmod.Spec, unit: specmod.Unit) -> str:
    """A hand-written source's text, or a family's template rendered with the row's params: compiled and
    rendered within bounds of time, memory and length (bounded.py), as a family is the table's text."""
    if unit.source:
        return unit.source.read_text(encoding="utf-8")
    env = render.environment(unit.family_path.parent)

    def describe(e: BaseException) -> str:  # the sandbox's SecurityError among them; a syntax error in an {% include %}
        return specmod.template_error(e, unit.family_path) if isinstance(e, jinja2.TemplateError) else specmod.one_line(e)

    try:
        return bounded.run([lambda: env.get_template(unit.family_path.name).render(unit.params)],
                           bounded.UNIT_CHARS, describe)[0]
    except bounded.Failed as e:
        raise errors.GenError(f"{specmod.unit_where(spec.path, unit.row, unit.line, unit.name)}: field 'family': "
                              f"family '{unit.family}': cannot render: {specmod.one_line(e)}") from None


HOISTED = re.compile(r"\s*(#\s*(include|pragma|define|undef)\b.*|//.*|)$")


def leading_lines(body: str) -> int:
    """How many lines a hand-written source starts with that are #include, #pragma, #define, #undef,
    comments or blank (a directive continued with a backslash counts whole; block comments end it)."""
    lines = body.split("\n")
    n = 0
    while n < len(lines) and HOISTED.match(lines[n]):
        while lines[n].endswith("\\") and n + 1 < len(lines):
            n += 1
        n += 1
    return n


def render_unit(spec: specmod.Spec, unit: specmod.Unit) -> str:
    """The translation unit. A hand-written source's leading #includes come before the #line that names
    it: NVRTC builds no precompiled header after a #line, so units of one include prefix share one."""
    return render_unit_hoisting(spec, unit)[0]


HEAD_MARK = "\0kiln: the hoisted lines\0"


def render_unit_hoisting(spec: specmod.Spec, unit: specmod.Unit) -> tuple[str, dict | None]:
    """The translation unit, and where the lines hoisted above its first #line are: {"first": the line
    of the unit they start at, "count", "file": the source they come from, as its #line names it}, or
    None. Compilers cite those lines in the unit; log_with_paths cites them in the source."""
    body = unit_body(spec, unit)
    head = ""
    if unit.source:
        lines = body.split("\n")
        hoisted = leading_lines(body)
        head, body = "\n".join(lines[:hoisted]), "\n".join(lines[hoisted:])
        if head:
            head += "\n"
        first_line = hoisted + 1
    text = render.environment().get_template("unit.cu.j2").render(
        spec_name=spec.path.name, registry=spec.name, unit=unit, head=HEAD_MARK if head else "", body=body,
        line_file=line_file(spec, unit), first_line=first_line if unit.source else 1, kernels_line=unit.kernels_line)
    if not head:
        return text, None
    before, _, after = text.partition(HEAD_MARK)
    return before + head + after, {"first": before.count("\n") + 1, "count": head.count("\n"),
                                   "file": line_file(spec, unit)}


def line_file(spec: specmod.Spec, unit: specmod.Unit) -> str:
    """How the translation unit's #line names a hand-written source: relative to the table, so that the
    unit's text (and digest, and cache key) does not depend on where the project lies."""
    return unit.source.relative_to(spec.path.resolve().parent).as_posix() if unit.source else ""


def unit_description(spec: specmod.Spec, unit: specmod.Unit, hoisted: dict | None = None) -> dict:
    """Everything later steps (and, later, the JIT tier) need to compile and name the unit. `hoisted`:
    render_unit_hoisting's, for compiler logs."""
    return {
        "registry": spec.name,
        "unit": unit.name,
        "where": specmod.unit_where(spec.path, unit.row, unit.line, unit.name),
        "kernels": [{"name": k.name, "expression": k.expression} for k in unit.kernels],
        "options": list(unit.options),
        "include_dirs": [str(d) for d in unit.include_dirs],
        "targets": list(unit.targets),
        "lower_arch": unit.lower_arch,
        # The files the unit's #line directives name, relative, and where they are: compiler logs are
        # shown with the paths (nvcc_compile.py, lowering.py). Not an input of the binaries.
        "paths": {k: v for k, v in ((line_file(spec, unit), str(unit.source)), (spec.path.name, str(spec.path.resolve())))
                  if k},
        # The source's lines above its #line, as the unit's: logs cite them in the source (log_with_paths).
        # Not an input of the binaries either.
        "hoisted": dict(hoisted, unit=source_name(spec.name, unit.name)) if hoisted else None,
    }


def log_with_paths(desc: dict, log: str) -> str:
    """A compiler's log with the files the unit's #line directives name (relative, so that the unit's text
    does not depend on where the project lies: `poly.cu(4)`, `geo.toml(12)`) given as paths one can open,
    and the lines hoisted above the first #line cited in the source they come from, not in the unit
    (`t.u.cu:3:10` -> `kernels/poly.cu:1:10`): NVRTC builds no precompiled header past a #line, so none
    can name them in the unit's text."""
    if hoisted := desc.get("hoisted"):
        log = hoisted_in_source(hoisted, log)
    for short, full in desc.get("paths", {}).items():
        log = re.sub(rf"(?<![\w./-]){re.escape(short)}(?=[(:][0-9])", lambda _: full, log)
    return log


# gcc's quote of a line under its error (`    3 | #include "x.h"`), which nvcc's preprocessor prints.
QUOTED_LINE = re.compile(r"^( *)([0-9]+)( \| )")


def hoisted_in_source(hoisted: dict, log: str) -> str:
    """`log` with the unit's hoisted lines cited in their source (a line number gcc quotes after such a
    citation too)."""
    first, last = hoisted["first"], hoisted["first"] + hoisted["count"] - 1
    unit = re.compile(rf"""(?<![\w.-])([^\s:()"']*/)?{re.escape(hoisted["unit"])}([(:])([0-9]+)""")
    shift = None  # how far the lines gcc quotes after a hoisted citation are moved

    def in_source(m: re.Match) -> str:
        nonlocal shift
        line = int(m.group(3))
        if not first <= line <= last:
            return m.group(0)
        shift = first - 1
        return f"{hoisted['file']}{m.group(2)}{line - shift}"

    lines = []
    for text in log.split("\n"):
        quoted = QUOTED_LINE.match(text)
        if quoted and shift is not None:
            number = str(int(quoted.group(2)) - shift)
            text = f"{quoted.group(1)}{number.rjust(len(quoted.group(2)))}{quoted.group(3)}{text[quoted.end():]}"
        elif not quoted:
            shift = None
            text = unit.sub(in_source, text)
        lines.append(text)
    return "\n".join(lines)


def compiler_options(desc: dict) -> list[str]:
    """A description's options and include directories, as nvcc and NVRTC both take them."""
    return [*desc["options"], *(f"-I{d}" for d in desc["include_dirs"])]


def write_source(spec: specmod.Spec, unit: specmod.Unit, directory: Path) -> UnitFiles:
    """Render a unit's translation unit and description into `directory`; returns where its files are."""
    files = UnitFiles(directory, spec.name, unit.name)
    text, hoisted = render_unit_hoisting(spec, unit)
    render.write_if_different(files.source, text)
    render.write_json(files.description, unit_description(spec, unit, hoisted))
    return files


def source_inputs(spec: specmod.Spec, unit: specmod.Unit) -> list[Path]:
    """The files a unit's rendered translation unit is made from."""
    return [spec.path.resolve(), *map(Path, render.CODEGEN_FILES), render.TEMPLATE_DIR / "unit.cu.j2",
            unit.source or unit.family_path, *([unit.family_declaration] if unit.family_declaration else [])]
