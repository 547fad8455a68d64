"""The `build` command: a whole table in one run, in worker processes, recompiling only units whose
translation unit, description or headers changed; its depfile; and its errors. Needs the toolkit's nvcc
and NVRTC: the build passes KILN_TOOLKIT."""

import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import cuda_toolkit  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import table_build  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

TOOLKIT = cuda_toolkit.Toolkit.at(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")))

TABLE = """[registry]
name = "inc"
namespace = "inc::kernels"
include_dirs = ["include"]

[[unit]]
name = "a"
source = "a.cu"
kernels = ["a"]

[[unit]]
name = "b"
source = "b.cu"
kernels = { b_f32 = "b<float>" }
options = {b_options}
"""


class Project:
    """A two-unit table in a temporary directory: `a` includes include/common.cuh, `b` is a template."""

    def __init__(self, root: Path):
        self.root = root
        self.out = root / "out"
        (root / "include").mkdir()
        (root / "include" / "common.cuh").write_text("#define COMMON_VALUE 1\n")
        (root / "a.cu").write_text('#include "common.cuh"\nextern "C" __global__ void a(int* x) { *x = COMMON_VALUE; }\n')
        (root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { *x = T(2); }\n")
        self.set_b_options("[]")

    def set_b_options(self, options: str):
        (self.root / "t.toml").write_text(TABLE.replace("{b_options}", options))

    def build(self, jobs=2, archs=(80,)) -> list[str]:
        spec = specmod.load(self.root / "t.toml", archs, embed_ptx=False)
        return table_build.build(spec, TOOLKIT, os.environ["KILN_PTX_STRIP"], self.out, self.out / "t.d", jobs)

    def binary(self, unit: str) -> Path:
        return table_build.work_dir(self.out, "inc") / unit_source.binary_name("inc", unit, "sm_80")


class Incremental(unittest.TestCase):
    def test_only_changed_units_recompile(self):
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            self.assertEqual(p.build(), ["a", "b"])
            for name in ("inc_catalog.hpp", "inc_catalog.cpp", "inc_blobs.S"):
                self.assertTrue((p.out / name).is_file(), name)
            self.assertIn("namespace inc::kernels", (p.out / "inc_catalog.hpp").read_text())
            for unit in ("a", "b"):
                os.utime(p.binary(unit), ns=(1000, 1000))

            self.assertEqual(p.build(), [], "a second run recompiles nothing")
            self.assertEqual(p.build(jobs=1), [], "nor does the number of jobs matter")

            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { *x = T(3); }\n")
            self.assertEqual(p.build(), ["b"], "an edited source recompiles its unit only")
            self.assertEqual(p.binary("a").stat().st_mtime_ns, 1000)
            self.assertNotEqual(p.binary("b").stat().st_mtime_ns, 1000)

            (p.root / "include" / "common.cuh").write_text("#define COMMON_VALUE 2\n")
            self.assertEqual(p.build(), ["a"], "an edited header recompiles the units that include it")

            os.utime(p.root / "a.cu")
            self.assertEqual(p.build(), [], "a touched but unchanged source recompiles nothing")

            p.set_b_options('["--use_fast_math"]')
            self.assertEqual(p.build(), ["b"], "changed options recompile their unit only")

            p.binary("a").unlink()
            self.assertEqual(p.build(), ["a"], "a missing binary is rebuilt")

    def test_depfile_and_timestamps(self):
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            p.build()
            deps = render.depfile_inputs(p.out / "t.d")
            for wanted in ("t.toml", "a.cu", "b.cu", "common.cuh", "unit.cu.j2", "catalog.cpp.j2", "blobs.S.j2",
                           "kiln_gen.py", "table_build.py", "cuda_runtime.h", "version.h"):
                self.assertTrue(any(Path(dep).name == wanted for dep in deps), f"{wanted} not in the depfile")
            self.assertTrue(all(Path(dep).is_file() for dep in deps))
            # An input edited without changing any output: the outputs still end up newer than every
            # input, or ninja would run the command again on every build.
            (p.root / "a.cu").write_text((p.root / "a.cu").read_text() + "// a comment\n")
            p.build()
            newest = max(Path(dep).stat().st_mtime_ns for dep in deps)
            for name in ("inc_catalog.hpp", "inc_catalog.cpp", "inc_blobs.S"):
                self.assertGreaterEqual((p.out / name).stat().st_mtime_ns, newest, name)


class Errors(unittest.TestCase):
    def run_main(self, root: Path):
        code, _, err = run_kiln_gen("build", "--spec", root / "t.toml", "--archs", "sm_80,sm_90", "--no-ptx",
                                    "--outdir", root / "out", "--toolkit", TOOLKIT.root, "--jobs", "2")
        return code, err

    def run_with_table_edit(self, old: str, new: str):
        """`build` of the project with `old` replaced by `new` in its table."""
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            (p.root / "t.toml").write_text((p.root / "t.toml").read_text().replace(old, new))
            return self.run_main(p.root)

    def test_failed_unit_names_itself_and_keeps_the_others(self):
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { *x = undeclared; }\n")
            code, err = self.run_main(p.root)
            self.assertEqual(code, 1)
            self.assertIn("t.toml:11: unit #2 'b': nvcc failed for sm_80", err)
            self.assertIn('identifier "undeclared" is undefined', err)
            self.assertNotIn("unit #1", err)
            self.assertEqual(err.count("nvcc failed"), 1, "one log per unit, not one per target")
            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { *x = T(2); }\n")
            self.assertEqual(p.build(archs=(80, 90)), ["b"], "the unit that compiled is not compiled again")

    def test_name_expression_that_does_not_resolve(self):
        code, err = self.run_with_table_edit("b<float>", "b<flaot>")
        self.assertEqual(code, 1)
        self.assertIn("t.toml:11: unit #2 'b': field 'kernels'", err)
        self.assertIn("flaot", err)  # NVRTC's log

    def test_bad_table(self):
        code, err = self.run_with_table_edit('"a.cu"', '"missing.cu"')
        self.assertEqual(code, 1)
        self.assertRegex(err, r"^kiln: error: .*t.toml:6: unit #1 'a': field 'source': cannot read 'missing.cu'")


if __name__ == "__main__":
    unittest.main()
