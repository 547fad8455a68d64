"""kiln-gen from-record: a demand record (what a run compiled at run time) becomes a spec table that
builds. The record is written here as the runtime writes it (runtime/src/program/record.cpp)."""

import os
import subprocess
import sys
import tempfile
import tomllib
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


def program_record(label="x", source="x", headers=(), kernels=("k",)) -> str:
    text = "kiln record 1\nprogram\n" + field("label", label) + field("source", source)
    for name, body in headers:
        text += field("header", name) + field("bytes", body)
    return text + "".join(field("kernel", k) for k in kernels) + "end\n"


KILN_GEN = Path(__file__).resolve().parents[2] / "codegen" / "kiln_gen.py"


class UntrustedRecord(unittest.TestCase):
    """A record is input from elsewhere: what it is, what it names and where kiln-gen writes are checked."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def from_record(self, record, out=None):
        """kiln-gen from-record in a process of its own, bounded in time: (exit code, stderr)."""
        out = out or self.root / "out"
        try:
            done = subprocess.run([sys.executable, KILN_GEN, "from-record", str(record), "--out", str(out),
                                   "--name", "recorded"], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            self.fail(f"kiln-gen from-record {record} did not return in 60 s")
        return done.returncode, done.stderr

    def test_a_fifo_or_a_device_is_refused_at_once_in_one_line(self):
        fifo = self.root / "pipe.record"
        os.mkfifo(fifo)
        for record in (fifo, Path("/dev/zero"), self.root):
            code, err = self.from_record(record)
            self.assertEqual(code, 1, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(f"{record}: not a regular file", err)
        self.assertFalse((self.root / "out").exists())

    def test_links_planted_under_out_are_replaced_never_written_through(self):
        victim = self.root / "victim"
        victim.write_text("precious")
        out = self.root / "out"
        (out / "sources").mkdir(parents=True)
        (out / "include").mkdir()
        (out / "sources" / "x.cu").symlink_to(victim)
        (out / "recorded.toml").symlink_to(victim)
        (out / "include" / "h.cuh").symlink_to(victim)
        record = self.root / "r.record"
        record.write_text(program_record(headers=[("h.cuh", "#define H 1\n")]))
        code, err = self.from_record(record, out)
        self.assertEqual(code, 0, err)
        self.assertEqual(victim.read_text(), "precious")
        for written in (out / "sources" / "x.cu", out / "recorded.toml", out / "include" / "h.cuh"):
            self.assertFalse(written.is_symlink(), written)
        self.assertEqual((out / "sources" / "x.cu").read_text(), "x")
        self.assertEqual((out / "include" / "h.cuh").read_text(), "#define H 1\n")
        self.assertEqual(sorted(p.name for p in out.iterdir()), ["include", "recorded.toml", "sources"])

    def test_a_directory_under_out_that_is_a_link_is_refused(self):
        elsewhere = self.root / "elsewhere"
        elsewhere.mkdir()
        out = self.root / "out"
        out.mkdir()
        (out / "sources").symlink_to(elsewhere)
        record = self.root / "r.record"
        record.write_text(program_record())
        code, err = self.from_record(record, out)
        self.assertEqual(code, 1, err)
        self.assertIn("sources: cannot write into it: a link or not a directory", err)
        self.assertEqual(list(elsewhere.iterdir()), [])

    def test_bad_header_names_are_refused_before_anything_is_written(self):
        for name, why in (("../../escape.cuh", "leads out of include"), ("/etc/x.cuh", "not a relative path"),
                          ("a\0b.cuh", "NUL"), ("", "names no file")):
            with self.subTest(name=name):
                record = self.root / "r.record"
                # A good program first: its source must not be written either.
                record.write_text(program_record("good", "good") + program_record(headers=[(name, "x")])[len("kiln record 1\n"):])
                out = self.root / ("out" + str(abs(hash(name))))
                code, err = self.from_record(record, out)
                self.assertEqual(code, 1, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(why, err)
                self.assertFalse(out.exists(), list(out.rglob("*")) if out.exists() else None)

    def test_control_characters_in_a_record_make_a_table_that_parses_to_the_same_strings(self):
        expressions = ["k<'\r'>", "k<'\x01'>", "k<'\x7f'>", 'k<"\\">', "k<'\t'>\nx = 1"]
        options = ["-DA=\"\r\"", "-DB=\x1f"]
        record = self.root / "r.record"
        # Options come before kernels in a record.
        text = program_record(label="odd\nlabel", kernels=())[:-len("end\n")]
        text += "".join(field("option", o) for o in options + ["-I/x\ny = 2"])
        text += "".join(field("kernel", e) for e in expressions) + "end\n"
        text += "table\n" + field("registry", "r\n[evil]") + field("kernel", "k\r\x01") + "arch 90\nend\n"
        record.write_text(text)
        code, err = self.from_record(record)
        self.assertEqual(code, 0, err)
        table = tomllib.loads((self.root / "out" / "recorded.toml").read_text())
        self.assertEqual(set(table), {"registry", "unit"})
        unit = table["unit"][0]
        self.assertEqual(sorted(unit["kernels"].values()), sorted(expressions))
        self.assertEqual(unit["options"], options)


if __name__ == "__main__":
    unittest.main()
