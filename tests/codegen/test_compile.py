"""The build's `compile` step: nvcc per target, with a depfile; a failed compile names the unit and
carries nvcc's full output. Needs the toolkit's nvcc: the build passes KILN_TOOLKIT."""

import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import cubin  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

NVCC = str(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "bin" / "nvcc")


class Compile(unittest.TestCase):
    def compile(self, root: Path, source: str, target: str):
        (root / "k.cu").write_text(source)
        (root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "k"\nsource = "k.cu"\nkernels = ["k"]\n')
        spec = specmod.load(root / "t.toml", (80,), True)
        files = unit_source.write_source(spec, spec.units[0], root)
        out = files.binary(target)
        code, _, err = run_kiln_gen("compile", "--unit-json", files.description, "--target", target, "--nvcc", NVCC,
                                    "--input", files.source, "--output", out, "--headers", files.headers(target),
                                    "--depfile", root / "k.d")
        return code, err, out

    def test_cubin_and_ptx(self):
        with tempfile.TemporaryDirectory() as d:
            source = 'extern "C" __global__ void k(int* x) { *x = 1; }\n'
            code, err, out = self.compile(Path(d), source, "sm_80")
            self.assertEqual(code, 0, err)
            self.assertEqual(cubin.cubin_arch(out.read_bytes()), 80)
            self.assertEqual(cubin.cubin_kernels(out.read_bytes()), {"k"})
            # ninja learns the source's dependencies: every one an existing file, the #line'd source too.
            deps = render.depfile_inputs(Path(d) / "k.d")
            self.assertIn(str(Path(d) / "k.cu"), deps)
            self.assertTrue(all(Path(p).is_absolute() and Path(p).is_file() for p in deps), deps)
            listed = json.loads(Path(str(out) + ".headers.json").read_text())
            self.assertRegex(listed["digest"], "^[0-9a-f]{64}$")
            self.assertTrue(any(h.endswith("cuda_runtime.h") for h in listed["headers"]))
            first_digest = listed["digest"]
            code, err, out = self.compile(Path(d), source, "compute_80")
            self.assertEqual(code, 0, err)
            self.assertEqual(cubin.ptx_arch(out.read_text()), 80)
            self.assertEqual(cubin.ptx_kernels(out.read_text()), {"k"})
            # The digest is the unit's, whatever the target.
            self.assertEqual(json.loads(Path(str(out) + ".headers.json").read_text())["digest"], first_digest)
            code, err, out = self.compile(Path(d), source.replace("= 1", "= 2"), "sm_80")
            self.assertNotEqual(json.loads(Path(str(out) + ".headers.json").read_text())["digest"], first_digest)

    def test_failed_compile_carries_the_log(self):
        with tempfile.TemporaryDirectory() as d:
            code, err, _ = self.compile(Path(d), 'extern "C" __global__ void k(int* x) { *x = undeclared; }\n', "sm_80")
        self.assertEqual(code, 1)
        self.assertIn("t.toml:4: unit #1 'k': nvcc failed for sm_80", err)
        self.assertIn('identifier "undeclared" is undefined', err)
        self.assertIn("k.cu", err)  # nvcc's message points at the original file, through #line


if __name__ == "__main__":
    unittest.main()
