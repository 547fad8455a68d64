"""The types libkiln_prim's fixed-type plans are instantiated for, from kiln's primitives table: for each
prim.* family whose declaration names a plan (`[plan]`, kiln_families.py), an X-macro list with one
X(...) per row of the family, in kiln/prim/plan_types.hpp. The plans' public headers expand the lists
into their `extern template` lines and primitives/src/*.cu into their instantiations, so a type is one
row of kernels/primitives.toml.

A row spells a type as its kernel is instantiated with it (`long long`: nvcc and NVRTC mangle it alike);
the list spells it as the public plans take it (`std::int64_t`, which is `long` on an LP64 host and a
type of its own: the host maps it back, kiln/prim/detail/plan.hpp's kernel_t)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import kiln_families
import render
import spec as specmod

TEMPLATE = "plan_types.hpp.j2"

# A row's spelling of a type -> (the public plans' spelling, the suffix of the unit's name). The suffixes
# are kiln/prim/detail/plan.hpp's type_suffix<T>(), by which a plan finds its unit.
HOST_TYPES = {
    "int": ("std::int32_t", "i32"),
    "unsigned int": ("std::uint32_t", "u32"),
    "long long": ("std::int64_t", "i64"),
    "unsigned long long": ("std::uint64_t", "u64"),
    "float": ("float", "f32"),
    "double": ("double", "f64"),
}


@dataclass(frozen=True)
class PlanList:
    family: str                        # prim.<name>
    plan: kiln_families.Plan
    macro: str                         # KILN_PRIM_<PLAN>_TYPES
    entries: tuple[tuple[str, ...], ...]  # one per row, in the table's order: X's arguments


def macro_name(cls: str) -> str:
    """ExclusiveSum -> KILN_PRIM_EXCLUSIVE_SUM_TYPES."""
    return "KILN_PRIM_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls).upper() + "_TYPES"


def plan_lists(spec: specmod.Spec) -> list[PlanList]:
    """Every prim.* family that names a plan, with its rows' entries: a family without rows keeps an empty
    list, so the headers that expand it still compile."""
    lists = []
    for family in kiln_families.known("prim."):
        plan = kiln_families.load(kiln_families.find(family)).plan
        if plan is None:
            continue
        entries = tuple(entry(spec, u, plan) for u in spec.units if u.family == family)
        lists.append(PlanList(family, plan, macro_name(plan.cls), entries))
    return lists


def entry(spec: specmod.Spec, unit: specmod.Unit, plan: kiln_families.Plan) -> tuple[str, ...]:
    """A row's X(...) arguments; the row's name must be the one the plan looks up for them."""
    where = specmod.unit_where(spec.path, unit.row, unit.line, unit.name)
    args, name = [], plan.unit
    for param in plan.args:
        value = " ".join(str(unit.params[param]).split())
        if param in plan.values:
            known = plan.values[param]
            if value not in known:
                raise specmod.SpecError(
                    f"{where}: field 'params': {param} = {value!r}: libkiln_prim's {plan.cls} is instantiated "
                    f"for {', '.join(known)} only")
            host = part = known[value]
        else:
            if value not in HOST_TYPES:
                raise specmod.SpecError(
                    f"{where}: field 'params': {param} = {value!r}: a row of libkiln_prim's {plan.cls} names one "
                    f"of {', '.join(HOST_TYPES)}, as its kernel is instantiated (the plan's list spells each "
                    f"as the host does: long long is std::int64_t)")
            host, part = HOST_TYPES[value]
        args.append(host)
        name = name.replace(f"{{{param}}}", part)
    if unit.name != name:
        raise specmod.SpecError(f"{where}: field 'name': {plan.cls} looks this row's kernels up as unit '{name}': "
                                f"name the row so")
    return tuple(args)


def header_text(spec: specmod.Spec) -> str:
    return render.environment().get_template(TEMPLATE).render(spec_name=spec.path.name, lists=plan_lists(spec))


def write_header(spec: specmod.Spec, output: Path, depfile: Path | None) -> None:
    """Write kiln/prim/plan_types.hpp (only when it changes) and its depfile: the table, the generator,
    the template and every prim.* declaration."""
    render.write_if_different(output, header_text(spec))
    if depfile is not None:
        declarations = [kiln_families.find(f) for f in kiln_families.known("prim.")]
        render.write_depfile(depfile, output, [spec.path.resolve(), *map(Path, render.CODEGEN_FILES),
                                               render.TEMPLATE_DIR / TEMPLATE, *declarations])

