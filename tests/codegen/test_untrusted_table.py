"""A spec table is input, not code: what it says cannot run a program, reach Python's internals or
name files outside its own tree, and every refusal names the file, the row and the field.

Also checks that validation does work proportional to the rows, not their square (without timing)."""

import os
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import bounded  # noqa: E402
import errors  # noqa: E402
import nvcc_compile  # noqa: E402
import spec  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402
from table_case import TableCase  # noqa: E402

NVCC = Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "bin" / "nvcc"
HEADER = '[registry]\nname = "t"\ntemplate_dirs = ["fam"]\n'
KERNEL = 'extern "C" __global__ void k() {}\n'


class UntrustedTable(TableCase):
    def setUp(self):
        super().setUp()
        (self.root / "fam").mkdir()
        (self.root / "k.cu").write_text(KERNEL)
        self.marker = Path(self.dir.name) / "ran"  # what an injected command would create

    def test_a_kernel_expression_cannot_reach_python(self):
        attack = "{{ cycler.__init__.__globals__.os.system('touch %s') }}" % self.marker
        table = HEADER + '[[unit]]\nname = "u"\nsource = "k.cu"\nkernels = { k = "%s" }\n' % attack
        self.refused(table, "unit #1 'u'", "field 'kernels'", "kernel 'k'", "unsafe")
        self.assertFalse(self.marker.exists(), "the expression ran a shell command")

    def one_line_refusal(self, table: str, *fragments: str) -> str:
        """`kiln-gen units` on `table`: exit 1 and one line naming the file and `fragments`, no traceback."""
        (self.root / "table.toml").write_text(table)
        code, out, err = run_kiln_gen("units", "--spec", self.root / "table.toml", "--archs", "sm_80")
        self.assertEqual(code, 1, out)
        self.assertEqual(len(err.splitlines()), 1, err)
        for f in ("kiln: error: ", "table.toml", *fragments):
            self.assertIn(f, err)
        return err

    def expression_table(self, expression: str) -> str:
        return HEADER + '[[unit]]\nname = "u"\nsource = "k.cu"\nkernels = { k = "%s" }\n' % expression

    def test_a_kernel_expression_loads_no_template(self):
        # An expression is rendered alone: {% include %}, {% import %}, {% extends %} are refused by name (a
        # Python traceback before: "no loader for this environment specified").
        (self.root / "fam" / "x").write_text("k")
        for tag, expression in (("include", "{% include 'x' %}"), ("import", "{% import 'x' as y %}"),
                                ("from ... import", "{% from 'x' import y %}"), ("extends", "{% extends 'x' %}")):
            with self.subTest(tag=tag):
                self.one_line_refusal(self.expression_table(expression), "unit #1 'u'", "field 'kernels'",
                                      "kernel 'k'", "{%% %s %%} is not allowed" % tag)

    def test_a_kernel_expression_is_bounded(self):
        # Memory (a MemoryError traceback before), time (the build hung: a nested loop, a power Jinja2 computes
        # while compiling), length, depth: each one line naming file, row and field.
        saved = bounded.SECONDS
        bounded.SECONDS = 1
        try:
            for expression, why in (("{{ 'a' * 10**11 }}", "memory"), ("{{ 'x' | center(10**10) }}", "memory"),
                                    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                                     "did not finish within 1 s"),
                                    ("{{ 10 ** (10 ** 10) }}", "did not finish within 1 s"),
                                    ("{{ 'a' * 100000 }}", "more than 65,536 characters"),
                                    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "too deeply"),
                                    ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "too deeply")):
                with self.subTest(expression=expression[:40]):
                    self.one_line_refusal(self.expression_table(expression), "unit #1 'u'", "field 'kernels'",
                                          "kernel 'k'", why)
        finally:
            bounded.SECONDS = saved
        # Within the bounds, every row renders with its own params.
        s = self.load(HEADER + '[[unit]]\nname = "a"\nsource = "k.cu"\nkernels = { a = "k{{ \'<int>\' if 1 else \'\' }}" }\n'
                      '[[unit]]\nname = "b"\nsource = "k.cu"\nkernels = { b = "k" }\n')
        self.assertEqual([k.expression for u in s.units for k in u.kernels], ["k<int>", "k"])

    def test_a_table_that_nests_too_deeply_is_one_line(self):
        self.one_line_refusal(HEADER + "x = " + "[" * 100000 + "]" * 100000 + "\n", "nest too deeply")
        (self.root / "fam" / "deep.cu.j2").write_text("{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}\n")
        self.one_line_refusal(HEADER + '[[unit]]\nname = "d"\nfamily = "deep"\nkernels = ["k"]\n',
                              "unit #1 'd'", "field 'family'", "nests too deeply")

    def test_a_path_no_file_can_have_is_one_line(self):
        # A NUL, a name longer than the system takes, a loop of links: a ValueError traceback, or an OSError
        # naming no row or field, before.
        (self.root / "loop1.cu").symlink_to(self.root / "loop2.cu")
        (self.root / "loop2.cu").symlink_to(self.root / "loop1.cu")
        long = "a" * 5000
        unit = '[[unit]]\nname = "u"\nsource = "%s"\nkernels = ["k"]\n'
        for field, table in (("include_dirs", HEADER + 'include_dirs = ["a\\u0000b"]\n' + unit % "k.cu"),
                             ("template_dirs", '[registry]\nname = "t"\ntemplate_dirs = ["a\\u0000b"]\n' + unit % "k.cu"),
                             ("include_dirs", HEADER + 'include_dirs = ["%s"]\n' % long + unit % "k.cu"),
                             ("source", HEADER + unit % "a\\u0000.cu"), ("source", HEADER + unit % (long + ".cu")),
                             ("source", HEADER + unit % "loop1.cu")):
            with self.subTest(field=field, table=table[-60:]):
                self.one_line_refusal(table, f"field '{field}'")

    def test_nothing_is_evaluated_while_a_template_compiles(self):
        # Jinja2 folds constants when it compiles, in the compiling process, which no bound covers:
        # `'a' * 10**11` hung a machine with the memory to build it. Folded, each of these puts a 10 MB
        # string into the compiled code; left to run time, the code is as short as the text.
        import jinja2.meta
        import render
        for text in ("{{ 'a' * 10**7 }}", "{{ 'a' * 10000000 }}", "{{ -(10**7) * 'a' }}",
                     "{{ 'a' | center(10000000) }}", "{{ ('a' ~ 'b') * 5000000 }}"):
            for env in (render.environment(), render.sandbox()):
                with self.subTest(text=text, env=type(env).__name__):
                    self.assertLess(len(env.compile(text, raw=True)), 10_000)
                    jinja2.meta.find_undeclared_variables(env.parse(text))  # as spec.family_params does
        self.assertEqual(render.sandbox().from_string("{{ 'ab' * 3 }}{{ -2 }}").render(), "ababab-2")

    def test_a_family_is_rendered_within_bounds(self):
        (self.root / "fam" / "loop.cu.j2").write_text(
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + KERNEL)
        (self.root / "fam" / "big.cu.j2").write_text("{{ 'a' * 10**11 }}" + KERNEL)
        table = HEADER + '[[unit]]\nname = "l"\nfamily = "loop"\nkernels = ["k"]\n'
        saved = bounded.SECONDS
        bounded.SECONDS = 1
        try:
            for family, why in (("loop", "did not finish within 1 s"), ("big", "memory")):
                with self.subTest(family=family):
                    (self.root / "table.toml").write_text(table.replace('"loop"', '"%s"' % family))
                    code, _, err = run_kiln_gen("source", "--spec", self.root / "table.toml", "--archs", "sm_80",
                                                "--unit", "l", "--outdir", self.dir.name, "--depfile",
                                                Path(self.dir.name) / "l.d")
                    self.assertEqual(code, 1)
                    self.assertEqual(len(err.splitlines()), 1, err)
                    for f in ("table.toml", "unit #1 'l'", "field 'family'", f"family '{family}'", why):
                        self.assertIn(f, err)
        finally:
            bounded.SECONDS = saved

    def test_a_family_template_cannot_reach_python(self):
        (self.root / "fam" / "evil.cu.j2").write_text(
            "// {{ cycler.__init__.__globals__.os.system('touch %s') }}\n%s" % (self.marker, KERNEL))
        table = HEADER + '[[unit]]\nname = "e"\nfamily = "evil"\nkernels = ["k"]\n'
        s = self.load(table)
        with self.assertRaises(errors.GenError) as ctx:
            unit_source.write_source(s, s.units[0], Path(self.dir.name))
        for f in ("table.toml", "unit #1 'e'", "family 'evil'", "unsafe"):
            self.assertIn(f, str(ctx.exception))
        self.assertFalse(self.marker.exists(), "the family template ran a shell command")

    def test_a_define_cannot_run_a_command_through_nvcc(self):
        # nvcc runs its stages through sh (`nvcc --dryrun` shows -D "X=..." in double quotes), so $( ) and
        # backquotes in a value would run, and nvcc splits -D values at commas where NVRTC does not.
        for value in ("$(touch %s)" % self.marker, "`touch %s`" % self.marker, "a\\\\b", "a,b"):
            with self.subTest(value=value):
                table = HEADER + '[[unit]]\nname = "u"\nsource = "k.cu"\nkernels = ["k"]\noptions = ["-DX=%s"]\n' % value
                self.refused(table, "unit #1 'u'", "field 'options'", "-DX=", "nvcc")
        # Quotes and spaces mean the same to both compilers: nvcc quotes them for its shell.
        ok = self.load(HEADER + '[[unit]]\nname = "u"\nsource = "k.cu"\nkernels = ["k"]\noptions = ["-DX=\\"a b\\" + (1)"]\n')
        self.assertIn('-DX="a b" + (1)', ok.units[0].options)

    @unittest.skipUnless(NVCC.is_file(), "needs the toolkit's nvcc (KILN_TOOLKIT)")
    def test_nvcc_is_never_handed_what_its_shell_would_run(self):
        work = Path(self.dir.name) / "work"
        work.mkdir()
        source = work / "k.cu"
        source.write_text(KERNEL)
        desc = {"where": "table.toml:4: unit #1 'u'", "kernels": [{"name": "k", "expression": "k"}],
                "options": ["-DX=$(touch %s)" % self.marker], "include_dirs": []}
        with self.assertRaises(errors.GenError) as ctx:
            nvcc_compile.compile_target(desc, "sm_80", str(NVCC), source, work / "k.cubin", work / "k.headers.json",
                                        work / "k.d", os.environ.get("KILN_PTX_STRIP", "kiln-ptx-strip"))
        self.assertIn("unit #1 'u'", str(ctx.exception))
        self.assertIn("-DX=$(touch", str(ctx.exception))
        self.assertFalse(self.marker.exists(), "nvcc's shell ran the option")

    def test_a_source_outside_the_tables_tree_is_refused_by_name(self):
        outside = Path(self.dir.name) / "outside.cu"
        outside.write_text(KERNEL)
        for value in ("../outside.cu", str(outside), "sub/../../outside.cu"):
            with self.subTest(value=value):
                self.refused(HEADER + '[[unit]]\nname = "u"\nsource = "%s"\nkernels = ["k"]\n' % value,
                             "unit #1 'u'", "field 'source'", "outside", "the table's directory")
        # Inside the tree, by any spelling, is fine; the #line names it relative to the table.
        (self.root / "sub").mkdir()
        s = self.load(HEADER + '[[unit]]\nname = "u"\nsource = "sub/../k.cu"\nkernels = ["k"]\n')
        self.assertIn('#line 1 "k.cu"', unit_source.render_unit(s, s.units[0]))

    def test_a_link_out_of_the_tables_tree_is_refused_by_name(self):
        outside = Path(self.dir.name) / "outside"
        outside.mkdir()
        (outside / "x.cu").write_text(KERNEL)
        (self.root / "x.cu").symlink_to(outside / "x.cu")
        (self.root / "linked_dir").symlink_to(outside)
        for value in ("x.cu", "linked_dir/x.cu"):
            with self.subTest(value=value):
                message = self.refused(HEADER + '[[unit]]\nname = "u"\nsource = "%s"\nkernels = ["k"]\n' % value,
                                       "unit #1 'u'", "field 'source'", "outside", "the table's directory")
                self.assertEqual(len(message.splitlines()), 1, message)
        # A link that stays in the tree is the table's own choice.
        (self.root / "in.cu").symlink_to(self.root / "k.cu")
        s = self.load(HEADER + '[[unit]]\nname = "u"\nsource = "in.cu"\nkernels = ["k"]\n')
        self.assertIn('#line 1 "in.cu"', unit_source.render_unit(s, s.units[0]))


class LinearValidation(unittest.TestCase):
    """Validation must do work proportional to the rows. Counted, not timed: the lines the validator
    (spec.py) executes for n and 2n rows (sys.settrace line events; the TOML parser and the rest are
    not counted). Work per row that grows with the rows before it shows as a ratio
    near 4 instead of 2."""

    def events(self, root: Path, rows: int) -> int:
        lines = ['[registry]\nname = "big"\n']
        for i in range(rows):
            lines.append(f'[[unit]]\nname = "u{i}"\nsource = "k.cu"\nkernels = ["k{i}"]\n')
        path = root / "big.toml"
        path.write_text("".join(lines))
        count = 0
        own = os.path.realpath(spec.__file__)
        mine: dict[str, bool] = {}

        # Lines run in spec.py, counted with a line tracer: opcode events (f_trace_opcodes) are not
        # delivered by every Python (a Python 3.12 counted none), line events are.
        def count_lines(frame, event, arg):
            nonlocal count
            count += event == "line"
            return count_lines

        def trace(frame, event, arg):
            name = frame.f_code.co_filename
            if name not in mine:
                mine[name] = os.path.realpath(name) == own
            return count_lines if mine[name] else None

        sys.settrace(trace)
        try:
            spec.load(path, (80,), embed_ptx=False)
        finally:
            sys.settrace(None)
        return count

    def test_validation_work_grows_linearly_with_the_rows(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "k.cu").write_text(KERNEL)
            small, large = self.events(root, 1000), self.events(root, 2000)
        self.assertGreater(small, 1000, "the tracer saw no work in spec.py")
        self.assertLess(large / small, 2.5, f"{small} events for 1,000 rows, {large} for 2,000")


if __name__ == "__main__":
    unittest.main()
