"""Whether a unit's kernels may be split over modules: the PTX reading (ptx_globals.py) on hand-written
PTX, and the flag the compile step records for units nvcc compiled (a written `__device__` variable: no;
CUB's block algorithms reading constant tables: yes). Needs nvcc and kiln-ptx-strip for the latter."""

import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import ptx_globals  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

NVCC = str(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "bin" / "nvcc")

HEAD = ".version 9.0\n.target sm_80\n.address_size 64\n\n"
TABLE = ".global .align 4 .b8 table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4};\n"
COUNTER = ".global .align 4 .u32 counter;\n"


def entry(name: str, body: str) -> str:
    return (f".visible .entry {name}(\n\t.param .u64 {name}_param_0\n)\n{{\n\t.reg .b32 %r<9>;\n\t.reg .b64 %rd<9>;\n"
            f"\t.reg .pred %p<3>;\n{body}\tret;\n\n}}\n")


# Registers of its own: the reading is per function, not per instruction (nvcc's PTX sets most once).
READ = "\tmov.u64 \t%rd7, table;\n\tadd.s64 \t%rd8, %rd7, 4;\n\tld.global.nc.u32 \t%r8, [%rd8];\n"


class Reading(unittest.TestCase):
    def test_a_table_only_read_is_not_written(self):
        ptx = HEAD + TABLE + entry("a", READ) + entry("b", "\tld.global.u32 \t%r2, [table+8];\n")
        self.assertEqual(ptx_globals.writable_globals(ptx), set())
        self.assertTrue(ptx_globals.splittable(ptx))

    def test_writes_through_an_address_however_it_was_made(self):
        cases = {
            "a store at the name": "\tst.global.u32 \t[counter], %r1;\n",
            "an atomic": "\tmov.u64 \t%rd1, counter;\n\tatom.global.add.u32 \t%r1, [%rd1], 1;\n",
            "a reduction after arithmetic and a loop's label": (
                "\tmov.u64 \t%rd1, counter;\n$L__BB0_1:\n\tcvta.global.u64 \t%rd3, %rd1;\n"
                "\tadd.s64 \t%rd4, %rd3, %rd2;\n\tmov.u64 \t%rd2, %rd4;\n\t@%p1 bra \t$L__BB0_1;\n"
                "\t@!%p2 red.global.add.u32 \t[%rd4], 1;\n"),
            "a store into a vector": "\tmov.u64 \t%rd1, counter;\n\tst.global.v2.u32 \t[%rd1], {%r1, %r2};\n",
            "a scope's store": "\t{\n\t.reg .b64 %t;\n\tmov.u64 \t%t, counter;\n\tst.u32 \t[%t], %r1;\n\t}\n",
        }
        for what, body in cases.items():
            with self.subTest(what):
                ptx = HEAD + COUNTER + TABLE + entry("a", READ + body)
                self.assertEqual(ptx_globals.writable_globals(ptx), {"counter"})
                self.assertFalse(ptx_globals.splittable(ptx))

    def test_an_address_that_escapes_may_be_written(self):
        cases = {
            "stored as a value": "\tmov.u64 \t%rd1, counter;\n\tld.param.u64 \t%rd2, [a_param_0];\n"
                                 "\tst.global.u64 \t[%rd2], %rd1;\n",
            "a call's parameter": "\tmov.u64 \t%rd1, counter;\n\t{\n\t.param .b64 param0;\n"
                                  "\tst.param.b64 \t[param0], %rd1;\n\tcall.uni \tbump, (param0);\n\t}\n",
        }
        for what, body in cases.items():
            with self.subTest(what):
                self.assertEqual(ptx_globals.writable_globals(HEAD + COUNTER + entry("a", body)), {"counter"})
        # Another variable's initialiser holding its address.
        pointer = ".global .align 8 .u64 where[1] = {generic(counter)};\n"
        self.assertEqual(ptx_globals.writable_globals(HEAD + COUNTER + pointer), {"counter"})

    def test_a_variable_the_host_may_name_counts_as_written(self):
        for declaration in (".visible .global .align 4 .u32 shared_value;\n",
                            ".global .attribute(.managed) .align 4 .u32 shared_value;\n"):
            with self.subTest(declaration):
                self.assertEqual(ptx_globals.writable_globals(HEAD + declaration), {"shared_value"})

    def test_text_that_is_not_ptx_is_not_splittable(self):
        self.assertFalse(ptx_globals.splittable(HEAD + entry("a", READ) + "}\n"))
        self.assertFalse(ptx_globals.splittable(HEAD + ".visible .entry a()\n{\n\tret;\n"))


# Two kernels of one unit sharing a variable one writes and the other reads.
SHARED_COUNTER = ('__device__ int counter;\n'
                  'extern "C" __global__ void count(int n) { atomicAdd(&counter, n); }\n'
                  'extern "C" __global__ void read(int* out) { *out = counter; }\n')
# Two kernels of CUB's block algorithms (their tables and tuning constants read, nothing written).
CUB_LIKE = ('#include <cub/block/block_reduce.cuh>\n#include <cub/block/block_scan.cuh>\n'
            '__device__ const int weights[4] = {1, 2, 3, 4};\n'
            'extern "C" __global__ void sum(const int* in, int* out) {\n'
            '  using R = cub::BlockReduce<int, 128>; __shared__ R::TempStorage t;\n'
            '  int s = R(t).Sum(in[threadIdx.x] * weights[threadIdx.x % 4]); if (threadIdx.x == 0) *out = s; }\n'
            'extern "C" __global__ void scan(const int* in, int* out) {\n'
            '  using S = cub::BlockScan<int, 128>; __shared__ S::TempStorage t;\n'
            '  int v; S(t).ExclusiveSum(in[threadIdx.x], v); out[threadIdx.x] = v; }\n')


class Recorded(unittest.TestCase):
    def flag(self, source: str, kernels: list[str], target: str = "sm_80") -> bool:
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "k.cu").write_text(source)
            (root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "k"\nsource = "k.cu"\n'
                                         f'kernels = {json.dumps(kernels)}\n')
            spec = specmod.load(root / "t.toml", (80,), True)
            files = unit_source.write_source(spec, spec.units[0], root)
            code, _, err = run_kiln_gen("compile", "--unit-json", files.description, "--target", target,
                                        "--nvcc", NVCC, "--input", files.source, "--output", files.binary(target),
                                        "--headers", files.headers(target), "--depfile", root / "k.d")
            self.assertEqual(code, 0, err)
            return json.loads(files.headers(target).read_text())["splittable"]

    def test_a_unit_writing_a_device_variable_is_not_splittable(self):
        self.assertFalse(self.flag(SHARED_COUNTER, ["count", "read"]))
        # Its PTX alone (a compute target) says the same.
        self.assertFalse(self.flag(SHARED_COUNTER, ["count", "read"], "compute_80"))

    def test_a_cub_like_unit_is_splittable(self):
        self.assertTrue(self.flag(CUB_LIKE, ["sum", "scan"]))

    def test_a_unit_of_one_kernel_is_never_split(self):
        self.assertFalse(self.flag('__device__ const int w[2] = {1, 2};\n'
                                   'extern "C" __global__ void sum(int* out) { *out = w[threadIdx.x % 2]; }\n', ["sum"]))


if __name__ == "__main__":
    unittest.main()
