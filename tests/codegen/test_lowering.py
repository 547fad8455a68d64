"""Kernel naming with NVRTC (the build's `lower` step): real names, and a clear error for a name that
does not resolve. Needs the toolkit's NVRTC: the build passes KILN_NVRTC and KILN_TOOLKIT."""

import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import lowering  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

TOOLKIT = os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")
NVRTC = os.environ.get("KILN_NVRTC", f"{TOOLKIT}/lib64/libnvrtc.so")


class Lowering(unittest.TestCase):
    def lower(self, spec, unit, directory: Path, headers: list[str] = ()):
        """The lower step of `unit`, as if nvcc had read `headers` for it."""
        files = unit_source.write_source(spec, unit, directory)
        listed = directory / f"{unit.name}.headers.json"
        render.write_json(listed, {"digest": "", "headers": list(headers)})
        code, _, err = run_kiln_gen("lower", "--unit-json", files.description, "--input", files.source,
                                    "--nvrtc", NVRTC, "--cuda-root", TOOLKIT, "--output", files.names,
                                    "--headers", listed, "--bundle", files.bundle, "--types", files.types)
        return code, err, files.names

    def test_names_of_the_fixture(self):
        spec = specmod.load(HERE / "fixtures" / "mini.toml", (75, 90), True)
        with tempfile.TemporaryDirectory() as d:
            for unit in spec.units:
                code, err, out = self.lower(spec, unit, Path(d))
                self.assertEqual(code, 0, err)
                names = json.loads(out.read_text())
                types = json.loads(unit_source.UnitFiles(Path(d), spec.name, unit.name).types.read_text())
                if unit.name == "fill":
                    self.assertEqual(names, {"fill": "fill"})
                    self.assertEqual(types, {"fill": "void(float*, float, int)"}, "an extern \"C\" kernel's too")
                else:
                    self.assertEqual(names, {"mini::axpy<float>": "_ZN4mini4axpyIfEEvT_PKS1_PS1_i"})
                    self.assertEqual(types, {"mini::axpy<float>": "void(float, float const*, float*, int)"})

    def test_types_of_kernels_with_the_projects_own_types(self):
        # Named as the demangler spells them; the catalog gives such a kernel an untyped handle.
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "s.cu").write_text("struct P { float x; };\ntemplate <typename T> __global__ void s(P p, const T* "
                                       "__restrict__ q, unsigned long long n) {}\n")
            (root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "s"\nsource = "s.cu"\n'
                                         'kernels = { s_f64 = "s<double>" }\n')
            spec = specmod.load(root / "t.toml", (90,), True)
            code, err, _ = self.lower(spec, spec.units[0], root)
            self.assertEqual(code, 0, err)
            types = json.loads(unit_source.UnitFiles(root, "t", "s").types.read_text())
        self.assertEqual(types, {"s<double>": "void(P, double const*, unsigned long long)"})
        import catalog  # noqa: E402: the step that decides which types the host knows
        self.assertEqual(catalog.host_signature(types["s<double>"]), "")
        self.assertEqual(catalog.host_signature("void(double const*, unsigned long long)"),
                         "void(double const*, unsigned long long)")
        self.assertEqual(catalog.host_signature(None), "")

    def test_expression_that_does_not_resolve(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "s.cu").write_text("template <typename T> __global__ void s(T* x) { *x = T(1); }\n")
            (root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "s"\nsource = "s.cu"\n'
                                         'kernels = { s_f32 = "s<flaot>" }\n')
            spec = specmod.load(root / "t.toml", (90,), True)
            code, err, _ = self.lower(spec, spec.units[0], root)
        self.assertEqual(code, 1)
        self.assertIn("t.toml:4: unit #1 's': field 'kernels'", err)
        self.assertIn("flaot", err)  # NVRTC's log, naming the bad identifier



class KernelNames(unittest.TestCase):
    """What a "did you mean" is drawn from: the __global__ functions a unit's text declares."""

    def test_kernels_declared_by_the_source(self):
        text = ('extern "C" __global__ void brighten(float* x) {}\n'
                "template <typename T> __global__ __launch_bounds__(256, 2) void darken(T* x) {}\n"
                "__global__ void __attribute__((used)) blur ( int ) ;\n__device__ int helper(int);\n")
        self.assertEqual(lowering.defined_kernels(text), ["brighten", "darken", "blur"])
        desc = {"kernels": [{"name": "b", "expression": "brigten"}, {"name": "d", "expression": "ns::darkn<float>"},
                            {"name": "z", "expression": "zzz"}, {"name": "t", "expression": "darken<flaot>"}]}
        self.assertEqual(lowering.unknown_names(desc, text), [
            "kernel 'b' = 'brigten': the source defines no kernel named 'brigten'; did you mean 'brighten'?",
            "kernel 'd' = 'ns::darkn<float>': the source defines no kernel named 'darkn'; did you mean 'darken'?",
            "kernel 'z' = 'zzz': the source defines no kernel named 'zzz' (its kernels: brighten, darken, blur)"])


if __name__ == "__main__":
    unittest.main()
