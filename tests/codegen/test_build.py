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
import errors  # noqa: E402
import progress  # noqa: E402
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
            # A touched source, and a header edited without changing any output, rewrite no output: what
            # includes the catalog is not recompiled. (Ninja does not rerun the command for the older
            # timestamps: Meson's custom_target has `restat = 1`; the consumer suite checks that with ninja.)
            outputs = ("inc_catalog.hpp", "inc_catalog.cpp", "inc_blobs.S")
            for name in outputs:
                os.utime(p.out / name, ns=(1000, 1000))
            os.utime(p.root / "a.cu")
            self.assertEqual(p.build(), [])
            for name in outputs:
                self.assertEqual((p.out / name).stat().st_mtime_ns, 1000, f"{name} rewritten after a touch")
            (p.root / "b.cu").write_text((p.root / "b.cu").read_text() + "// a comment\n")
            self.assertEqual(p.build(), ["b"], "an edited source recompiles its unit")
            self.assertEqual((p.out / "inc_catalog.hpp").stat().st_mtime_ns, 1000, "the header did not change")


class Errors(unittest.TestCase):
    def run_main(self, root: Path, *more):
        code, _, err = run_kiln_gen("build", "--spec", root / "t.toml", "--archs", "sm_80,sm_90", "--no-ptx",
                                    "--outdir", root / "out", "--toolkit", TOOLKIT.root, "--jobs", "2", *more)
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
            self.assertEqual(err.count('identifier "undeclared" is undefined'), 1, "nor NVRTC's log of the same error")
            self.assertRegex(err, r"/b\.cu\(1\): error", "the file by its path")
            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { *x = T(2); }\n")
            self.assertEqual(p.build(archs=(80, 90)), ["b"], "the unit that compiled is not compiled again")

    def test_name_expression_that_does_not_resolve(self):
        code, err = self.run_with_table_edit("b<float>", "b<flaot>")
        self.assertEqual(code, 1)
        self.assertIn("t.toml:11: unit #2 'b': field 'kernels'", err)
        self.assertIn("flaot", err)
        self.assertEqual(err.count('"flaot" is undefined'), 1, "reported once, not by nvcc and by NVRTC")

    def test_misspelt_kernel_name_is_reported_once_with_the_close_names(self):
        # nvcc's error on the unit's reference to the kernel, then NVRTC's on the name expression, said the
        # same twice, without naming what the source defines.
        source = ('extern "C" __global__ void brighten(float* x) { *x += 1; }\n'
                  'extern "C" __global__ void __launch_bounds__(64) darken(float* x) { *x -= 1; }\n')
        for jit_only in ("", "jit_only = true\n"):
            with self.subTest(jit_only=bool(jit_only)), tempfile.TemporaryDirectory() as d:
                root = Path(d)
                (root / "k.cu").write_text(source)
                (root / "t.toml").write_text('[registry]\nname = "k"\n\n[[unit]]\nname = "k"\nsource = "k.cu"\n'
                                             'kernels = ["brigten", "darken", "zzz"]\n' + jit_only)
                code, err = self.run_main(root)
                self.assertEqual(code, 1)
                self.assertIn("t.toml:4: unit #1 'k': field 'kernels': kernel 'brigten': the source defines no "
                              "kernel named 'brigten'; did you mean 'brighten'?", err)
                self.assertIn("kernel 'zzz': the source defines no kernel named 'zzz' (its kernels: brighten, darken)",
                              err)
                self.assertNotIn("kernel 'darken'", err)
                self.assertNotIn("nvcc failed", err)
                self.assertLessEqual(err.count('"brigten" is undefined'), 1, err)
                if not jit_only:  # nvcc's log, which cites the row's `kernels` in the table
                    self.assertRegex(err, r"/t\.toml\(7\): error: identifier \"brigten\" is undefined")

    def test_a_missing_header_is_cited_in_the_users_file_with_a_hint(self):
        # The leading #includes sit above the unit's #line (NVRTC's precompiled header): nvcc cited them at
        # the generated unit's line (k.k.cu:4), and said nothing of include_dirs.
        kernel = 'extern "C" __global__ void brighten(float* x) { *x += 1; }\n'
        for source, line in (('// brighten\n#include "missing.h"\n' + kernel, 2), (kernel + '#include "missing.h"\n', 2)):
            with self.subTest(line=line, hoisted=source.startswith("//")), tempfile.TemporaryDirectory() as d:
                root = Path(d)
                (root / "kernels").mkdir()
                (root / "kernels" / "brighten.cu").write_text(source)
                (root / "t.toml").write_text('[registry]\nname = "k"\n\n[[unit]]\nname = "k"\n'
                                             'source = "kernels/brighten.cu"\nkernels = ["brighten"]\n')
                code, err = self.run_main(root)
                self.assertEqual(code, 1)
                self.assertIn(f"{root / 'kernels' / 'brighten.cu'}:{line}:10: fatal error: missing.h: No such file", err)
                if source.startswith("//"):  # gcc quotes the line, numbered as in the source
                    self.assertRegex(err, rf"\n +{line} \| #include \"missing.h\"")
                self.assertNotRegex(err, r"k\.k\.cu[:(][0-9]", "no line of the generated unit")
                self.assertRegex(err, r"\nhint: nvcc looked for 'missing.h' in .*/kernels and the toolkit's headers; "
                                      r"add the directory it is in to the table's `include_dirs`")
                unit = (root / "out" / "k.kiln" / "k.k.cu").read_text()
                self.assertIn('"kernels/brighten.cu"', unit)
                self.assertNotIn(str(root), unit, "the unit's text (its digest, the cache key) names no absolute path")

    def test_bad_table(self):
        code, err = self.run_with_table_edit('"a.cu"', '"missing.cu"')
        self.assertEqual(code, 1)
        self.assertRegex(err, r"^kiln: error: .*t.toml:6: unit #1 'a': field 'source': cannot read 'missing.cu'")

    def test_name_expression_error_points_at_the_table(self):
        # nvcc compiles the references to the name expressions under a #line naming the row's `kernels`:
        # its error cites the table's line (as a path one can open), not a line past the end of b.cu.
        code, err = self.run_with_table_edit("b<float>", "b<flaot>")
        self.assertEqual(code, 1)
        self.assertRegex(err, r"/t\.toml\(14\): error: identifier \"flaot\" is undefined")
        self.assertNotRegex(err, r"(?<![\w/])b\.cu\(", "every file nvcc names is given as a path")

    def test_outputs_declared_for_another_registry_name(self):
        # A registry renamed in its table while the build file still declares the old outputs: a clear
        # error, not the old catalog left in place and linked.
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            out = p.root / "out"
            declared = [out / "old_catalog.hpp", out / "old_catalog.cpp", out / "old_blobs.S"]
            code, _, err = run_kiln_gen("build", "--spec", p.root / "t.toml", "--archs", "sm_80", "--no-ptx",
                                        "--outputs", *declared, "--toolkit", TOOLKIT.root)
            self.assertEqual(code, 1)
            self.assertIn('[registry] name = "inc": kiln-gen writes inc_catalog.hpp, inc_catalog.cpp, inc_blobs.S, '
                          'but the build declares', err)
            self.assertNotIn("Traceback", err)
            self.assertFalse(out.exists(), "nothing is built")
            good = [out / "inc_catalog.hpp", out / "inc_catalog.cpp", out / "inc_blobs.S"]
            code, _, err = run_kiln_gen("build", "--spec", p.root / "t.toml", "--archs", "sm_80", "--no-ptx",
                                        "--outputs", *good, "--toolkit", TOOLKIT.root)
            self.assertEqual(code, 0, err)
            self.assertTrue(all(f.is_file() for f in good))

    def test_warnings_of_units_that_built_are_counted_or_shown(self):
        with tempfile.TemporaryDirectory() as d:
            p = Project(Path(d))
            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { int unused; *x = T(2); }\n")
            code, err = self.run_main(p.root)
            self.assertEqual(code, 0, err)
            self.assertIn("kiln-gen: registry inc: 1 unit compiled with compiler warnings; "
                          "`kiln-gen build --warnings` shows them", err)
            self.assertNotIn("unused", err)
            (p.root / "b.cu").write_text("template <typename T> __global__ void b(T* x) { int unused2; *x = T(2); }\n")
            code, err = self.run_main(p.root, "--warnings")
            self.assertEqual(code, 0, err)
            self.assertIn("unit #2 'b': compiled with warnings", err)
            self.assertRegex(err, r"/b\.cu\(1\): warning #177-D: variable \"unused2\"")


class JitView(unittest.TestCase):
    """The lower step compiles each unit as the JIT tier will (in-memory headers, no include directory):
    a unit whose JIT would fail does not build."""

    def build(self, root: Path, table: str, jobs=2, archs=(80,), embed_ptx=False):
        (root / "t.toml").write_text(table)
        spec = specmod.load(root / "t.toml", archs, embed_ptx=embed_ptx)
        return table_build.build(spec, TOOLKIT, os.environ["KILN_PTX_STRIP"], root / "out", None, jobs)

    def test_include_dir_inside_the_source_dir(self):
        # A consumer's layout: include_dirs = ["include"] inside the table's folder, a quoted include of the
        # project's header, one reached through a macro, and CUB.
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "include" / "myproj").mkdir(parents=True)
            (root / "include" / "myproj" / "poly.cuh").write_text(
                '#pragma once\n#include "detail.cuh"\nnamespace myproj { template <typename T> __device__ T poly(T x) '
                '{ return detail::twice(x) + T(1); } }\n')
            (root / "include" / "myproj" / "detail.cuh").write_text(
                "#pragma once\nnamespace myproj::detail { template <typename T> __device__ T twice(T x) { return x + x; } }\n")
            (root / "include" / "myproj" / "extra.cuh").write_text("#pragma once\n#define EXTRA 3\n")
            (root / "poly.cu").write_text(
                '#include "myproj/poly.cuh"\n#define EXTRA_HEADER <myproj/extra.cuh>\n#include EXTRA_HEADER\n'
                "#include <cub/warp/warp_reduce.cuh>\n"
                "template <typename T> __global__ void poly(T* x) { x[threadIdx.x] = myproj::poly(x[threadIdx.x]) + EXTRA; }\n")
            self.build(root, '[registry]\nname = "p"\ninclude_dirs = ["include"]\n\n[[unit]]\nname = "poly"\n'
                             'source = "poly.cu"\nkernels = { poly_f32 = "poly<float>" }\n')
            names = {row["name"] for row in render.read_json(root / "out" / "p.kiln" / "p.poly.bundle.json")["headers"]}
            self.assertTrue({"myproj/poly.cuh", "myproj/detail.cuh", "myproj/extra.cuh", "cub/warp/warp_reduce.cuh"} <= names,
                            sorted(names)[:10])

    def test_a_header_the_jit_cannot_open_fails_the_build(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "include" / "p").mkdir(parents=True)
            (root / "include" / "p" / "a.cuh").write_text('#pragma once\n#ifdef __CUDACC_RTC__\n#include "p/rtc.cuh"\n#endif\n')
            (root / "include" / "p" / "rtc.cuh").write_text("#pragma once\n")
            (root / "k.cu").write_text('#include <p/a.cuh>\nextern "C" __global__ void k(int* x) { *x = 1; }\n')
            with self.assertRaises(errors.GenError) as ctx:
                self.build(root, '[registry]\nname = "k"\ninclude_dirs = ["include"]\n\n[[unit]]\nname = "k"\n'
                                 'source = "k.cu"\nkernels = ["k"]\n')
            message = str(ctx.exception)
            self.assertIn("t.toml:5: unit #1 'k': nvcc compiled this unit, but the JIT tier could not", message)
            self.assertIn('cannot open source file "p/rtc.cuh"', message)

    def test_linked_unit_ships_lto_ir(self):
        # A linked row's kernels call a function defined at run time: no cubin can be made, but nvcc's
        # LTO-IR can, for each arch, in a fatbin of its own that the catalog indexes as kind ltoir.
        source = ('template <typename R, typename... A> __device__ R linked_operator(A... a);\n'
                  'extern "C" __global__ void l(float* x) { *x = linked_operator<float, float>(*x); }\n')
        table = '[registry]\nname = "l"\n\n[[unit]]\nname = "l"\nsource = "l.cu"\nkernels = ["l"]\nlinked = true\n'
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "l.cu").write_text(source)
            self.assertEqual(self.build(root, table, archs=(80, 90), embed_ptx=True), ["l"])
            work = root / "out" / "l.kiln"
            self.assertEqual(sorted(p.name for p in work.glob("*.ltoir")), ["l.l.lto_80.ltoir", "l.l.lto_90.ltoir"])
            self.assertEqual(sorted(p.name for p in work.glob("*.fatbin")), ["l.l.ltoir.fatbin"])
            self.assertEqual(list(work.glob("*.cubin")) + list(work.glob("*.ptx")), [])
            cpp = (root / "out" / "l_catalog.cpp").read_text()
            self.assertIn(".first_binary = 0, .binary_count = 2", cpp)
            self.assertEqual(cpp.count(".kind = kiln::BinaryKind::ltoir"), 2)
            self.assertIn("// l lto_80", cpp)
            self.assertIn("// l lto_90", cpp)
            self.assertIn(".linked = true", cpp)

    def test_jit_only_unit(self):
        # nvcc refuses a goto past an initialisation that NVRTC accepts (with a warning): such a row can be
        # JIT-only. It has no binary; NVRTC still checks it (and names its kernel) at build time.
        goto = ('extern "C" __global__ void g(int* x) {\n  if (*x) goto done;\n  int y = 3;\n  *x = y;\ndone:\n'
                '  return;\n}\n')
        table = '[registry]\nname = "j"\n\n[[unit]]\nname = "g"\nsource = "g.cu"\nkernels = ["g"]\n'
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "g.cu").write_text(goto)
            with self.assertRaisesRegex(errors.GenError, "transfer of control bypasses initialization"):
                self.build(root, table)
            self.assertEqual(self.build(root, table + "jit_only = true\n"), ["g"])
            self.assertEqual(self.build(root, table + "jit_only = true\n"), [], "and it is up to date")
            work = root / "out" / "j.kiln"
            self.assertEqual(sorted(p.name for p in work.glob("*.cubin")) + sorted(p.name for p in work.glob("*.ptx")), [])
            self.assertEqual(render.read_json(work / "j.g.names.json"), {"g": "g"})
            cpp = (root / "out" / "j_catalog.cpp").read_text()
            self.assertIn(".first_binary = 0, .binary_count = 0", cpp)
            (root / "g.cu").write_text(goto.replace("int y = 3;", "int y = undeclared;"))
            with self.assertRaisesRegex(errors.GenError, 'identifier "undeclared" is undefined'):
                self.build(root, table + "jit_only = true\n")


class SharedRuns(unittest.TestCase):
    """JIT-only units share a compiler run where it gives each the same answer: one nvcc -M for units with
    the same directives, one NVRTC run for those whose text NVRTC reads alike (kiln's primitives: 81 units,
    7 such groups). Each unit still gets its own files, its own names and its own errors."""

    HEADER = "#pragma once\ntemplate <typename T> __global__ void k(T* x) { *x = T(1); }\n"

    class Recorder(progress.Report):
        def __init__(self):
            self.runs: list[tuple[str, list[str]]] = []
            self.warned: list[str] = []  # where each warnings text was told

        def shared(self, what: str, units: list[str]) -> None:
            self.runs.append((what, sorted(units)))

        def warnings(self, where: str, text: str) -> None:
            self.warned.append(where)

    def build(self, root: Path, kernels: dict[str, str], jobs=2):
        """A JIT-only table: a unit per entry of `kernels` ({unit: name expression}) on s.cu, and `o` on o.cu,
        whose #include is the same but whose text is not."""
        rows = "".join(f'[[unit]]\nname = "{u}"\nsource = "s.cu"\nkernels = {{ {u}_k = "{e}" }}\njit_only = true\n\n'
                       for u, e in kernels.items())
        (root / "t.toml").write_text('[registry]\nname = "s"\ninclude_dirs = ["include"]\n\n' + rows +
                                     '[[unit]]\nname = "o"\nsource = "o.cu"\nkernels = ["o"]\njit_only = true\n')
        spec = specmod.load(root / "t.toml", (80,), embed_ptx=False)
        self.report = self.Recorder()
        built = table_build.build(spec, TOOLKIT, os.environ["KILN_PTX_STRIP"], root / "out", None, jobs, self.report)
        return built, self.report.runs

    def project(self, d: str) -> Path:
        root = Path(d)
        (root / "include").mkdir()
        (root / "include" / "t.cuh").write_text(self.HEADER)
        (root / "s.cu").write_text('#include "t.cuh"\n// one source, several instantiations\n')
        (root / "o.cu").write_text('#include "t.cuh"\nextern "C" __global__ void o(int* x) { *x = 2; }\n')
        return root

    def test_a_shared_scan_tells_its_warnings_once(self):
        with tempfile.TemporaryDirectory() as d:
            root = self.project(d)
            (root / "include" / "t.cuh").write_text(self.HEADER + '#warning "kiln test: a shared header warns"\n')
            built, runs = self.build(root, {"f": "k<float>", "i": "k<int>", "d": "k<double>"})
            self.assertEqual(built, ["f", "i", "d", "o"])
            self.assertEqual(runs[0], ("headers listed", ["d", "f", "i", "o"]))
            # One nvcc -M for the four units: its warnings once, not once per unit (four times before).
            self.assertEqual(len(self.report.warned), 1, self.report.warned)

    def test_units_alike_share_a_scan_and_a_lowering(self):
        for jobs in (1, 2):
            with self.subTest(jobs=jobs), tempfile.TemporaryDirectory() as d:
                root = self.project(d)
                built, runs = self.build(root, {"f": "k<float>", "i": "k<int>", "d": "k<double>"}, jobs)
                self.assertEqual(built, ["f", "i", "d", "o"])
                self.assertEqual(runs, [("headers listed", ["d", "f", "i", "o"]), ("names lowered", ["d", "f", "i"])])
                work = root / "out" / "s.kiln"
                for unit, mangled, kind in (("f", "_Z1kIfEvPT_", "void(float*)"), ("i", "_Z1kIiEvPT_", "void(int*)"),
                                            ("d", "_Z1kIdEvPT_", "void(double*)")):
                    expression = {"f": "k<float>", "i": "k<int>", "d": "k<double>"}[unit]
                    self.assertEqual(render.read_json(work / f"s.{unit}.names.json"), {expression: mangled})
                    self.assertEqual(render.read_json(work / f"s.{unit}.types.json"), {expression: kind})
                    names = [row["name"] for row in render.read_json(work / f"s.{unit}.bundle.json")["headers"]]
                    self.assertEqual(names, ["t.cuh"])
                listed = {u: render.read_json(work / f"s.{u}.headers.json") for u in "fido"}
                self.assertEqual(len({tuple(v["headers"]) for v in listed.values()}), 1, "one list for all")
                self.assertEqual(listed["f"]["headers"][-1], str(root / "include" / "t.cuh"))
                self.assertEqual(len({v["digest"] for v in listed.values()}), 4, "each unit its own digest")
                self.assertEqual(render.read_json(work / "s.o.names.json"), {"o": "o"})
                self.assertEqual(self.build(root, {"f": "k<float>", "i": "k<int>", "d": "k<double>"}, jobs)[0], [],
                                 "and it is up to date")
                (root / "include" / "t.cuh").write_text(self.HEADER + "// edited\n")
                self.assertEqual(self.build(root, {"f": "k<float>", "i": "k<int>", "d": "k<double>"}, jobs)[0],
                                 ["f", "i", "d", "o"], "a header they share changed")

    def test_each_unit_keeps_its_own_errors(self):
        with tempfile.TemporaryDirectory() as d:
            root = self.project(d)
            with self.assertRaises(errors.GenError) as ctx:
                self.build(root, {"f": "k<float>", "bad": "k<flaot>", "i": "k<int>"})
            message = str(ctx.exception)
            self.assertIn("unit #2 'bad': field 'kernels'", message)
            self.assertNotIn("unit #1", message)
            self.assertNotIn("unit #3", message)
            work = root / "out" / "s.kiln"
            self.assertEqual(render.read_json(work / "s.i.names.json"), {"k<int>": "_Z1kIiEvPT_"}, "the others are kept")
            self.assertEqual(self.build(root, {"f": "k<float>", "bad": "k<float>", "i": "k<int>"})[0], ["bad"])
            # A header none of them finds: the shared scan fails, and each unit says so itself.
            (root / "s.cu").write_text('#include "missing.cuh"\n')
            with self.assertRaises(errors.GenError) as ctx:
                self.build(root, {"f": "k<float>", "i": "k<int>"})
            message = str(ctx.exception)
            for row in ("unit #1 'f'", "unit #2 'i'"):
                self.assertIn(f"{row}: nvcc failed for its headers", message)
            self.assertNotIn("unit #3 'o'", message)


if __name__ == "__main__":
    unittest.main()
