"""The build's `compile` step: nvcc per target, with a depfile; cubins assembled lean (no unreferenced
globals) with the same code; a failed compile names the unit and carries nvcc's full output. Needs the
toolkit's nvcc and kiln-ptx-strip: the build passes KILN_TOOLKIT and KILN_PTX_STRIP."""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import cubin  # noqa: E402
import nvcc_compile  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

NVCC = str(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "bin" / "nvcc")

# A unit whose translation unit defines device globals nothing uses, as CCCL's headers do by the dozen.
UNUSED_GLOBALS = ('static __device__ int unused_table[4] = {1, 2, 3, 4};\n'
                  'static __device__ char unused_tag[1];\n'
                  'extern "C" __global__ void k(int* x) { *x = 1; }\n')
USED_GLOBAL = 'static __device__ int used_value = 7;\nextern "C" __global__ void k(int* x) { *x = used_value; }\n'


def elf_sections(data: bytes) -> dict[str, bytes]:
    """A cubin's sections by name (NOBITS ones empty)."""
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    out = {}
    for name, kind, _, _, offset, size, *_ in headers:
        label = data[names + name:data.index(b"\0", names + name)].decode()
        out[label] = b"" if kind == 8 else data[offset:offset + size]
    return out


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

    def test_a_cubin_is_assembled_lean_with_the_same_code(self):
        with tempfile.TemporaryDirectory() as d:
            code, err, out = self.compile(Path(d), UNUSED_GLOBALS, "sm_80")
            self.assertEqual(code, 0, err)
            lean = out.read_bytes()
            # nvcc's own cubin of the same translation unit keeps the unused globals ...
            plain = Path(d) / "plain.cubin"
            source = Path(d) / unit_source.source_name("t", "k")
            subprocess.run([NVCC, "-cubin", "-arch=sm_80", "-o", str(plain), str(source)], check=True)
            self.assertIn(b"unused_table", elf_sections(plain.read_bytes())[".strtab"])
            # ... the lean one has none, and the same kernel code.
            sections = elf_sections(lean)
            self.assertNotIn(b"unused_table", sections[".strtab"])
            self.assertNotIn(b"unused_tag", sections[".strtab"])
            text = [n for n in sections if n.startswith(".text.")]
            self.assertEqual(text, [".text.k"])
            self.assertEqual(sections[".text.k"], elf_sections(plain.read_bytes())[".text.k"])
            self.assertEqual(cubin.cubin_kernels(lean), {"k"})
            # Only the unit's outputs are left: no intermediate PTX.
            self.assertEqual(sorted(p.name for p in Path(d).glob("*.ptx")), [])
            # A global the code uses stays.
            code, err, out = self.compile(Path(d), USED_GLOBAL, "sm_80")
            self.assertEqual(code, 0, err)
            self.assertIn(b"used_value", elf_sections(out.read_bytes())[".strtab"])

    def test_a_cubin_keeps_its_ptx_for_the_compute_target_of_its_arch(self):
        """The build compiles sm_XX and compute_XX of one arch with one nvcc -ptx: the PTX kept for the
        compute target is the one `compile --target compute_XX` makes, with the same headers and digest."""
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            code, err, alone = self.compile(root, UNUSED_GLOBALS, "compute_80")
            self.assertEqual(code, 0, err)
            expected, expected_headers = alone.read_bytes(), json.loads(Path(f"{alone}.headers.json").read_text())
            alone.unlink()
            spec = specmod.load(root / "t.toml", (80,), True)
            files = unit_source.UnitFiles(root, "t", "k")
            nvcc_compile.compile_target(render.read_json(files.description), "sm_80", NVCC, files.source,
                                        files.binary("sm_80"), files.headers("sm_80"), root / "sm.d",
                                        os.environ["KILN_PTX_STRIP"],
                                        nvcc_compile.TargetFiles(alone, files.headers("compute_80"), root / "ptx.d"))
            self.assertEqual(spec.units[0].targets, ("sm_80", "compute_80"))
            self.assertEqual(alone.read_bytes(), expected)
            self.assertEqual(json.loads(files.headers("compute_80").read_text()), expected_headers)
            self.assertEqual(cubin.cubin_kernels(files.binary("sm_80").read_bytes()), {"k"})
            self.assertIn(str(root / "k.cu"), render.depfile_inputs(root / "ptx.d"))
            self.assertEqual(sorted(p.name for p in root.glob("*.ptx")), [alone.name])

    def test_a_missing_ptx_strip_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "k.cu").write_text(UNUSED_GLOBALS)
            (root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "k"\nsource = "k.cu"\nkernels = ["k"]\n')
            spec = specmod.load(root / "t.toml", (80,), True)
            files = unit_source.write_source(spec, spec.units[0], root)
            code, _, err = run_kiln_gen("--ptx-strip", root / "missing-tool", "compile", "--unit-json", files.description,
                                        "--target", "sm_80", "--nvcc", NVCC, "--input", files.source,
                                        "--output", files.binary("sm_80"), "--headers", files.headers("sm_80"),
                                        "--depfile", root / "k.d")
            self.assertEqual(code, 1)
            self.assertIn("missing-tool is not an executable file", err)
            self.assertFalse(files.binary("sm_80").exists())

    def test_failed_compile_carries_the_log(self):
        with tempfile.TemporaryDirectory() as d:
            code, err, _ = self.compile(Path(d), 'extern "C" __global__ void k(int* x) { *x = undeclared; }\n', "sm_80")
        self.assertEqual(code, 1)
        self.assertIn("t.toml:4: unit #1 'k': nvcc failed for sm_80", err)
        self.assertIn('identifier "undeclared" is undefined', err)
        self.assertIn("k.cu", err)  # nvcc's message points at the original file, through #line


if __name__ == "__main__":
    unittest.main()
