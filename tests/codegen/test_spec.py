"""Spec table validation: every mistake gives one error naming the file, the row and the field."""

import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "codegen"))
import spec  # noqa: E402

ARCHS = (80, 90)
HEADER = '[registry]\nname = "t"\n'
GOOD_UNIT = '[[unit]]\nname = "ok"\nsource = "k.cu"\nkernels = ["k"]\n'


class SpecErrors(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        (self.root / "k.cu").write_text('extern "C" __global__ void k() {}\n')
        (self.root / "fam").mkdir()
        (self.root / "fam" / "twice.cu.j2").write_text("template __global__ void f<{{ T }}, {{ N }}>();\n")

    def tearDown(self):
        self.dir.cleanup()

    def load(self, text: str):
        path = self.root / "table.toml"
        path.write_text(textwrap.dedent(text))
        return spec.load(path, ARCHS, embed_ptx=True)

    def error(self, text: str, *fragments: str) -> str:
        with self.assertRaises(spec.SpecError) as ctx:
            self.load(text)
        message = str(ctx.exception)
        self.assertIn("table.toml", message)
        for f in fragments:
            self.assertIn(f, message)
        return message

    def test_good_table_loads(self):
        s = self.load(HEADER + GOOD_UNIT)
        self.assertEqual(s.name, "t")
        self.assertEqual(s.namespace, "t")
        unit = s.units[0]
        self.assertEqual(unit.archs, ARCHS)
        self.assertEqual(unit.ptx_arch, 90)
        self.assertEqual(unit.kernels, (spec.Kernel("k", "k"),))
        self.assertIn("-std=c++17", unit.options)
        self.assertIn("-DCUB_DISABLE_NAMESPACE_MAGIC", unit.options)

    def test_not_toml(self):
        self.error("[registry\n", "not valid TOML")

    def test_missing_registry(self):
        self.error(GOOD_UNIT, "missing [registry]")

    def test_unknown_top_level_key(self):
        self.error(HEADER + GOOD_UNIT + "[extra]\nx = 1\n", "unknown top-level key 'extra'")

    def test_registry_name_not_identifier(self):
        self.error('[registry]\nname = "my-kernels"\n' + GOOD_UNIT, "[registry]", "field 'name'")

    def test_bad_namespace(self):
        self.error('[registry]\nname = "t"\nnamespace = "a::"\n' + GOOD_UNIT, "field 'namespace'")

    def test_no_units(self):
        self.error(HEADER, "one or more [[unit]] rows")

    def test_unit_without_name(self):
        msg = self.error(HEADER + '[[unit]]\nsource = "k.cu"\nkernels = ["k"]\n', "unit #1", "field 'name'", "missing")
        self.assertIn("table.toml:3:", msg)  # the line of the row's [[unit]] header

    def test_unknown_unit_field(self):
        self.error(HEADER + GOOD_UNIT.replace("kernels", "kernel"), "unit #1 'ok'", "field 'kernel'", "unknown field")

    def test_source_and_family(self):
        self.error(HEADER + GOOD_UNIT + 'family = "twice"\n', "unit #1 'ok'", "exactly one of 'source'")

    def test_neither_source_nor_family(self):
        self.error(HEADER + '[[unit]]\nname = "x"\nkernels = ["k"]\n', "unit #1 'x'", "exactly one of")

    def test_duplicate_unit_name(self):
        msg = self.error(HEADER + GOOD_UNIT + GOOD_UNIT, "unit #2 'ok'", "field 'name'", "earlier row")
        self.assertIn("table.toml:7:", msg)

    def test_duplicate_kernel_name(self):
        second = GOOD_UNIT.replace('name = "ok"', 'name = "ok2"')
        self.error(HEADER + GOOD_UNIT + second, "unit #2 'ok2'", "field 'kernels'", "'k' is already exported by unit 'ok'")

    def test_unreadable_source(self):
        self.error(HEADER + GOOD_UNIT.replace("k.cu", "missing.cu"), "unit #1 'ok'", "field 'source'", "cannot read")

    def test_source_not_utf8(self):
        (self.root / "latin1.cu").write_bytes(b"// caf\xe9\n__global__ void k() {}\n")
        self.error(HEADER + GOOD_UNIT.replace("k.cu", "latin1.cu"), "unit #1 'ok'", "field 'source'",
                   "is not UTF-8 text (byte 6: b'\\xe9')")

    def test_unknown_family(self):
        table = HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "f"\nfamily = "thrice"\nkernels = ["f"]\n'
        self.error(table, "unit #1 'f'", "field 'family'", "unknown family 'thrice'", "known: ", "twice")

    def test_family_parameter_not_allowed(self):
        table = (HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "f"\nfamily = "twice"\n'
                 'params = { T = "int", N = 2, M = 3 }\nkernels = ["f"]\n')
        self.error(table, "unit #1 'f'", "field 'params'", "'M' is not allowed", "takes N, T")

    def test_family_parameter_missing(self):
        table = (HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "f"\nfamily = "twice"\n'
                 'params = { T = "int" }\nkernels = ["f"]\n')
        self.error(table, "field 'params'", "needs N")

    def test_params_with_source(self):
        self.error(HEADER + GOOD_UNIT + 'params = { T = "int" }\n', "field 'params'", "only allowed with 'family'")

    def test_kernels_wrong_type(self):
        self.error(HEADER + '[[unit]]\nname = "x"\nsource = "k.cu"\nkernels = "k"\n', "field 'kernels'", "non-empty list")

    def test_template_expression_in_plain_list(self):
        self.error(HEADER + '[[unit]]\nname = "x"\nsource = "k.cu"\nkernels = ["k<int>"]\n', "field 'kernels'", "use a table")

    def test_kernel_expression_with_unknown_param(self):
        table = (HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "f"\nfamily = "twice"\n'
                 'params = { T = "int", N = 2 }\nkernels = { f = "f<{{ U }}>" }\n')
        self.error(table, "field 'kernels'", "kernel 'f'", "cannot render")

    def test_option_not_allowed(self):
        self.error(HEADER + GOOD_UNIT + 'options = ["-O0"]\n', "field 'options'", "'-O0'", "allowed:")

    def test_unknown_arch(self):
        self.error(HEADER + GOOD_UNIT + 'archs = ["sm_91"]\n', "field 'archs'", "'sm_91'")

    def test_repeated_arch(self):
        self.error(HEADER + GOOD_UNIT + 'archs = ["sm_90", "sm_90"]\n', "field 'archs'", "listed twice")

    def test_arch_override_and_family_params(self):
        table = (HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "f"\nfamily = "twice"\n'
                 'params = { T = "int", N = 2 }\nkernels = { f = "f<{{ T }},  {{ N }}>" }\narchs = ["sm_89", "sm_75"]\n')
        unit = self.load(table).units[0]
        self.assertEqual(unit.archs, (75, 89))
        self.assertEqual(unit.ptx_arch, 89)
        self.assertEqual(unit.kernels[0].expression, "f<int, 2>")
        self.assertEqual(unit.params, {"N": 2, "T": "int"})

    def test_family_with_a_jinja_syntax_error_names_the_template_and_line(self):
        (self.root / "fam" / "broken.cu.j2").write_text("// ok\n{% if T %}\ntemplate __global__ void f<{{ T }}>();\n")
        message = self.error(HEADER + 'template_dirs = ["fam"]\n[[unit]]\nname = "b"\nfamily = "broken"\n'
                             'params = { T = "float" }\nkernels = { b = "f<float>" }\n',
                             "unit #1 'b': field 'family'", "broken.cu.j2:3: template syntax error")
        self.assertIn("endif", message)  # Jinja2's own words: what it expected

    def test_jit_only_unit_has_no_targets(self):
        s = self.load(HEADER + GOOD_UNIT.replace('kernels = ["k"]', 'kernels = ["k"]\njit_only = true'))
        unit = s.units[0]
        self.assertTrue(unit.jit_only)
        self.assertEqual(unit.targets, ())
        self.assertEqual(unit.lower_arch, 80)
        self.error(HEADER + GOOD_UNIT + 'jit_only = "yes"\n', "field 'jit_only'", "expected true or false")
        self.error(HEADER + GOOD_UNIT + 'jit_only = true\narchs = ["sm_90"]\n', "field 'archs'", "jit_only")

    def test_linked_unit_is_jit_only_with_rdc(self):
        s = self.load(HEADER + GOOD_UNIT.replace('kernels = ["k"]', 'kernels = ["k"]\nlinked = true'))
        unit = s.units[0]
        self.assertTrue(unit.linked)
        self.assertTrue(unit.jit_only)
        # No cubin and no PTX: LTO-IR for every arch of the build, which the run time links.
        self.assertEqual(unit.targets, ("lto_80", "lto_90"))
        self.assertIn("-rdc=true", unit.options)
        # jit_only as well: nothing ahead of time, as for a whole table built JIT-only.
        both = self.load(HEADER + GOOD_UNIT.replace('kernels = ["k"]', 'kernels = ["k"]\nlinked = true\njit_only = true'))
        self.assertEqual(both.units[0].targets, ())
        path = self.root / "table.toml"
        self.assertEqual(spec.load(path, ARCHS, embed_ptx=True, jit_only=True).units[0].targets, ())
        self.assertNotIn("-rdc=true", self.load(HEADER + GOOD_UNIT).units[0].options)
        self.error(HEADER + GOOD_UNIT + 'linked = 1\n', "field 'linked'", "expected true or false")
        self.error(HEADER + GOOD_UNIT + 'linked = true\narchs = ["sm_90"]\n', "field 'archs'", "linked")

    def test_diag_options_both_compilers_take(self):
        s = self.load(HEADER + GOOD_UNIT + 'options = ["--diag-suppress=177", "--diag-warn=550", "--diag-error=20"]\n')
        self.assertIn("--diag-suppress=177", s.units[0].options)
        self.error(HEADER + GOOD_UNIT + 'options = ["--diag-suppress=177,550"]\n', "field 'options'")

    def test_kernels_line_is_the_rows(self):
        s = self.load(HEADER + "\n" + GOOD_UNIT + '\n[[unit]]\nname = "two"\nsource = "k.cu"\n\nkernels = ["k2"]\n')
        self.assertEqual([u.kernels_line for u in s.units], [7, 13])

    def test_kernel_name_that_is_a_cpp_keyword(self):
        self.error(HEADER + GOOD_UNIT.replace('kernels = ["k"]', 'kernels = { int = "k" }'),
                   "field 'kernels'", "'int' is a C++ keyword")

    def test_table_not_utf8(self):
        path = self.root / "table.toml"
        path.write_bytes(HEADER.encode() + b"# \xff\n" + GOOD_UNIT.encode())
        with self.assertRaises(spec.SpecError) as ctx:
            spec.load(path, ARCHS, True)
        self.assertIn("table.toml: the spec table is not UTF-8 text", str(ctx.exception))

    def test_unreadable_table(self):
        with self.assertRaises(spec.SpecError) as ctx:
            spec.load(self.root / "nope.toml", ARCHS, True)
        self.assertIn("nope.toml: cannot read the spec table", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
