"""kiln-gen plan-types: the types of libkiln_prim's fixed-type plans, one X(...) per prim.* row, spelled
as the host spells them; a row that cannot be one names the file, the row and the field."""

import re
import unittest
from pathlib import Path

from table_case import TableCase  # puts codegen/ on the path
from run_kiln_gen import run_kiln_gen
import errors  # noqa: E402
import kiln_families  # noqa: E402
import plan_types  # noqa: E402
import spec as specmod  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HEADER = '[registry]\nname = "t"\n'


def lists(text: str) -> dict[str, list[str]]:
    """The header's macros: name -> the X(...) entries, in order."""
    return {m.group(1): re.findall(r"X\(([^)]*)\)", m.group(2))
            for m in re.finditer(r"#define (KILN_PRIM_\w+_TYPES)\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)}


def row(name: str, family: str, params: str) -> str:
    return f'[[unit]]\nname = "{name}"\nfamily = "{family}"\nparams = {{ {params} }}\n'


class PlanTypes(TableCase):
    def header(self, text: str) -> dict[str, list[str]]:
        return lists(plan_types.header_text(self.load(text)))

    def test_primitives_table_gives_every_plan_its_rows_types(self):
        table = ROOT / "kernels" / "primitives.toml"
        got = lists(plan_types.header_text(specmod.load(table, self.ARCHS, embed_ptx=False)))
        self.assertEqual(got["KILN_PRIM_EXCLUSIVE_SUM_TYPES"], ["std::int32_t", "std::int64_t"])
        self.assertEqual(got["KILN_PRIM_SEGMENTED_REDUCE_TYPES"],
                         ["std::int32_t, sum", "double, sum", "double, min", "double, max"])
        self.assertIn("std::uint64_t, upper", got["KILN_PRIM_SORTED_SEARCH_TYPES"])
        self.assertEqual(len(got), len(kiln_families.known("prim.")))   # every prim.* family names its plan
        self.assertEqual(sum(map(len, got.values())), 27)                # one entry per fixed-type row

    def test_a_row_added_is_its_type_in_the_list(self):
        before = HEADER + row("exclusive_scan_i32", "prim.exclusive_scan", 'T = "int"')
        added = before + row("exclusive_scan_u64", "prim.exclusive_scan", 'T = "unsigned long long"')
        self.assertEqual(self.header(before)["KILN_PRIM_EXCLUSIVE_SUM_TYPES"], ["std::int32_t"])
        self.assertEqual(self.header(added)["KILN_PRIM_EXCLUSIVE_SUM_TYPES"], ["std::int32_t", "std::uint64_t"])
        # The same through the command a build runs.
        (self.root / "table.toml").write_text(added)
        out = self.root / "kiln" / "prim" / "plan_types.hpp"
        out.parent.mkdir(parents=True)
        code, _, err = run_kiln_gen("--ptx-strip", "/bin/true", "plan-types", "--spec", self.root / "table.toml",
                                    "--archs", "sm_80", "--output", out, "--depfile", self.root / "plan_types.d")
        self.assertEqual(code, 0, err)
        self.assertEqual(lists(out.read_text())["KILN_PRIM_EXCLUSIVE_SUM_TYPES"], ["std::int32_t", "std::uint64_t"])
        deps = (self.root / "plan_types.d").read_text()
        self.assertIn(str(self.root / "table.toml"), deps)
        self.assertIn(str(ROOT / "templates" / "families" / "prim" / "exclusive_scan.toml"), deps)

    def test_row_spells_the_kernels_type_and_the_list_the_hosts(self):
        got = self.header(HEADER + row("radix_sort_pairs_i64", "prim.radix_sort_pairs", 'K = "long  long"') +
                          row("radix_sort_pairs_u32", "prim.radix_sort_pairs", 'K = "unsigned int"') +
                          row("radix_sort_pairs_f32", "prim.radix_sort_pairs", 'K = "float"'))
        self.assertEqual(got["KILN_PRIM_RADIX_SORT_PAIRS_TYPES"], ["std::int64_t", "std::uint32_t", "float"])

    def test_other_parameters_as_the_declaration_spells_them(self):
        got = self.header(HEADER + row("segmented_reduce_min_i32", "prim.segmented_reduce",
                                       'T = "int", Op = "::cuda::minimum<>"') +
                          row("upper_bound_f64", "prim.search", 'Bound = "upper_bound", T = "double"'))
        self.assertEqual(got["KILN_PRIM_SEGMENTED_REDUCE_TYPES"], ["std::int32_t, min"])
        self.assertEqual(got["KILN_PRIM_SORTED_SEARCH_TYPES"], ["double, upper"])

    def test_a_family_without_rows_keeps_an_empty_list(self):
        text = plan_types.header_text(self.load(HEADER + row("reduce_i32", "prim.reduce", 'T = "int"')))
        self.assertEqual(lists(text)["KILN_PRIM_UNIQUE_BY_KEY_TYPES"], [])
        self.assertIn("#define KILN_PRIM_UNIQUE_BY_KEY_TYPES(X)\n", text)

    def test_a_row_that_cannot_be_an_instance_names_file_row_and_field(self):
        for params, name, fragments in (
                ('T = "short"', "exclusive_scan_i16", ("field 'params'", "T = 'short'", "ExclusiveSum", "long long")),
                ('T = "std::int64_t"', "exclusive_scan_i64", ("field 'params'", "T = 'std::int64_t'")),
                ('T = "int"', "exclusive_scan_int", ("field 'name'", "unit 'exclusive_scan_i32'"))):
            with self.subTest(params=params):
                spec = self.load(HEADER + row("reduce_i32", "prim.reduce", 'T = "int"') +
                                 row(name, "prim.exclusive_scan", params))
                with self.assertRaises(errors.GenError) as ctx:
                    plan_types.header_text(spec)
                for f in ("table.toml", f"unit #2 '{name}'", *fragments):
                    self.assertIn(f, str(ctx.exception))
        spec = self.load(HEADER + row("segmented_reduce_sum_f32", "prim.segmented_reduce",
                                      'T = "float", Op = "::cuda::std::multiplies<>"'))
        with self.assertRaises(errors.GenError) as ctx:
            plan_types.header_text(spec)
        self.assertIn("Op = '::cuda::std::multiplies<>': libkiln_prim's SegmentedReduce is instantiated for "
                      "::cuda::std::plus<>, ::cuda::minimum<>, ::cuda::maximum<> only", str(ctx.exception))

    def test_plan_declaration_mistakes_name_the_file(self):
        (self.root / "t.cu.j2").write_text("")
        kernels = '[kernels]\nk = "x"\n[params]\nT = {}\n'
        for plan, fragment in (('class = "scan"\nargs = ["T"]\nunit = "s_{T}"', "plan.class"),
                               ('class = "Scan"\nargs = ["U"]\nunit = "s_{U}"', "plan.args"),
                               ('class = "Scan"\nargs = ["T"]\nunit = "s"', "plan.unit"),
                               ('class = "Scan"\nargs = ["T"]\nunit = "s_{T}"\nvalues = { T = 1 }', "plan.values"),
                               ('class = "Scan"\nargs = ["T"]\nunit = "s_{T}"\nsize = 1', "plan: expected")):
            with self.subTest(plan=plan):
                (self.root / "t.toml").write_text(f'template = "t.cu.j2"\n{kernels}[plan]\n{plan}\n')
                with self.assertRaises(errors.GenError) as ctx:
                    kiln_families.load(self.root / "t.toml")
                self.assertIn(str(self.root / "t.toml"), str(ctx.exception))
                self.assertIn(fragment, str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
