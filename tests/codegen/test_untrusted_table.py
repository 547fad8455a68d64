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
import errors  # noqa: E402
import nvcc_compile  # noqa: E402
import spec  # noqa: E402
import unit_source  # noqa: E402
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
