"""kiln-gen from-record: a demand record (what a run compiled at run time) becomes a spec table that
builds. The record is written here as the runtime writes it (runtime/src/program/record.cpp)."""

import tempfile
import unittest
from pathlib import Path

from run_kiln_gen import run_kiln_gen


def field(kind: str, value: str) -> str:
    return f"{kind} {len(value.encode())}\n{value}\n"


SOURCE = """#include "ops/twice.cuh"
template <typename T>
__global__ void twice_all(T* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice(x[i]);
}
"""


def record_text() -> str:
    program = ("program\n" + field("label", "filters/twice") + field("source", SOURCE) +
               field("header", "ops/twice.cuh") + field("bytes", "template <typename T> __device__ T twice(T v) { return v + v; }\n") +
               field("option", "-std=c++17") + field("option", "-I/somewhere/else") +
               field("kernel", "twice_all<float>") + field("kernel", "twice_all<int>") + "end\n")
    table = "table\n" + field("registry", "examples") + field("kernel", "vector_add") + "arch 120\nend\n"
    return "kiln record 1\n" + program + program + table  # a program twice: one row


class FromRecord(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def test_a_record_becomes_a_table_that_builds(self):
        record = self.root / "demand.record"
        record.write_text(record_text())
        out = self.root / "embedded"
        code, stdout, err = run_kiln_gen("from-record", record, "--out", out, "--name", "filters")
        self.assertEqual(code, 0, err)
        table = (out / "filters.toml").read_text()
        self.assertEqual(table.count("[[unit]]"), 1)
        self.assertIn('"twice_all<float>"', table)
        self.assertIn('"-std=c++17"', table)
        self.assertNotIn("-I/somewhere/else\"", table.split("#")[0])  # the path is dropped, said in a comment
        self.assertIn("examples vector_add sm_120", table)
        self.assertTrue((out / "include" / "ops" / "twice.cuh").is_file())
        code, _, err = run_kiln_gen("build", "--spec", out / "filters.toml", "--archs", "sm_80", "--no-ptx",
                                    "--outdir", self.root / "build")
        self.assertEqual(code, 0, err)
        self.assertTrue((self.root / "build" / "filters_catalog.cpp").is_file())

    def test_what_is_not_a_record_is_one_line_naming_the_file_and_line(self):
        record = self.root / "bad.record"
        record.write_text("kiln record 1\nprogram\nlabel 99\nshort\n")
        code, _, err = run_kiln_gen("from-record", record, "--out", self.root / "x", "--name", "x")
        self.assertEqual(code, 1)
        self.assertIn("bad.record:3", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_a_header_name_leading_out_of_include_is_refused(self):
        record = self.root / "evil.record"
        record.write_text("kiln record 1\nprogram\n" + field("label", "x") + field("source", "x") +
                          field("header", "../../escape.cuh") + field("bytes", "x") + field("kernel", "k") + "end\n")
        code, _, err = run_kiln_gen("from-record", record, "--out", self.root / "x", "--name", "x")
        self.assertEqual(code, 1)
        self.assertIn("leads out of include", err)
        self.assertFalse((self.root / "escape.cuh").exists())


if __name__ == "__main__":
    unittest.main()
