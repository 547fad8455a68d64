"""The header bundle for the JIT tier: a unit carries the headers its translation unit reaches through
what nvcc read, named as its #includes spell them; a header found beside its includer is renamed to its
path, and the directive rewritten; headers only nvcc's implicit includes or the host read are left out;
two files under one name are a build error; and the compressed frame decompresses to the same bytes."""

import ctypes
import ctypes.util
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "codegen"))
import header_bundle  # noqa: E402


def decompress(frame: bytes, size: int) -> bytes:
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    out = ctypes.create_string_buffer(size)
    got = lib.ZSTD_decompress(out, size, frame, len(frame))
    return out.raw[:got]


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


class HeaderBundle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def named(self, unit, toolkit=None):
        bundle = header_bundle.build_bundle([unit], toolkit)
        return {bundle.headers[i][0]: bytes(bundle.raw[bundle.headers[i][1]:bundle.headers[i][1] + bundle.headers[i][2]])
                for i in bundle.unit_headers[0]}, bundle

    def test_the_closure_of_the_translation_unit_named_as_included(self):
        r = self.root
        toolkit = r / "toolkit"
        read = [write(r / "inc/proj/api.cuh", '#pragma once\n#include "detail/impl.cuh"\n#include <cub/cub.cuh>\n'),
                write(r / "inc/proj/detail/impl.cuh", '#pragma once\n#include "../common.cuh"\n'),
                write(r / "inc/proj/common.cuh", "// common\n"),
                write(toolkit / "include/cccl/cub/cub.cuh", "// cub\n"),
                write(toolkit / "include/cuda_runtime.h", "// implicit: nvcc reads it, nothing includes it\n"),
                write(r / "host.h", "// host only\n")]
        tu = write(r / "build/unit.cu", "// generated\n#include <proj/api.cuh>\n#include <stdio.h>\n__global__ void k() {}\n")
        headers, bundle = self.named(header_bundle.UnitInput(Path(tu), [str(r / "inc")], read), toolkit)
        self.assertEqual(sorted(headers), ["cub/cub.cuh", "proj/api.cuh", "proj/common.cuh", "proj/detail/impl.cuh"])
        # Found beside their includers, so named by their path, and the directives say that name.
        self.assertIn(b'#include "proj/detail/impl.cuh"', headers["proj/api.cuh"])
        self.assertIn(b'#include "proj/common.cuh"', headers["proj/detail/impl.cuh"])
        self.assertIn(b"#include <cub/cub.cuh>", headers["proj/api.cuh"])  # as it was
        self.assertEqual(headers["proj/common.cuh"], b"// common\n")

        out = r / "b.zst"
        compressed_size, digest = header_bundle.compress(bundle.raw, out)
        self.assertEqual(out.stat().st_size, compressed_size)
        self.assertRegex(digest, "^[0-9a-f]{64}$")
        self.assertEqual(decompress(out.read_bytes(), len(bundle.raw)), bytes(bundle.raw))

    def test_a_unit_that_includes_nothing_carries_nothing(self):
        r = self.root
        read = [write(r / "toolkit/include/cuda_runtime.h", "// nvcc's implicit include\n")]
        tu = write(r / "unit.cu", "extern \"C\" __global__ void k() {}\n")
        headers, _ = self.named(header_bundle.UnitInput(Path(tu), [], read), r / "toolkit")
        self.assertEqual(headers, {})

    def test_the_first_header_nvcc_read_wins_over_one_it_did_not(self):
        r = self.root
        toolkit = r / "toolkit"
        write(toolkit / "include/cccl/nv/target", "// not the one nvcc read\n")
        read = [write(toolkit / "include/nv/target", "// the one nvcc read\n")]
        tu = write(r / "unit.cu", "#include <nv/target>\n")
        headers, _ = self.named(header_bundle.UnitInput(Path(tu), [], read), toolkit)
        self.assertEqual(headers, {"nv/target": b"// the one nvcc read\n"})

    def test_two_files_under_one_name_are_a_build_error(self):
        r = self.root
        read = [write(r / "a/x.cuh", '#include "same.cuh"\n'), write(r / "a/same.cuh", "// a\n"),
                write(r / "b/y.cuh", '#include "same.cuh"\n'), write(r / "b/same.cuh", "// b\n")]
        tu = write(r / "unit.cu", "#include <x.cuh>\n#include <y.cuh>\n")
        with self.assertRaisesRegex(header_bundle.BundleError, "two headers are included as 'same.cuh'"):
            self.named(header_bundle.UnitInput(Path(tu), [str(r / "a"), str(r / "b")], read))

    def test_a_computed_include_keeps_every_header_nvcc_read(self):
        r = self.root
        read = [write(r / "inc/a.cuh", "#define WHICH <b.cuh>\n#include WHICH\n"), write(r / "inc/b.cuh", "// b\n")]
        tu = write(r / "unit.cu", "#include <a.cuh>\n")
        headers, _ = self.named(header_bundle.UnitInput(Path(tu), [str(r / "inc")], read))
        self.assertEqual(sorted(headers), ["a.cuh", "b.cuh"])

    def test_nested_roots_give_a_computed_include_every_name(self):
        # The layout kiln's kernels/ uses: the source's directory (a root) holds include/ (another root).
        # A macro may spell <proj/x.cuh> (through include/) or <include/proj/x.cuh>: both names are bundled,
        # the bytes once. (Named by the first root alone, the JIT could not open "proj/x.cuh".)
        r = self.root
        read = [write(r / "t/include/proj/x.cuh", "// x\n")]
        tu = write(r / "build/unit.cu", "#define WHICH <proj/x.cuh>\n#include WHICH\n")
        headers, bundle = self.named(header_bundle.UnitInput(Path(tu), [str(r / "t"), str(r / "t/include")], read))
        self.assertEqual(sorted(headers), ["include/proj/x.cuh", "proj/x.cuh"])
        self.assertEqual(bytes(bundle.raw), b"// x\n")
        self.assertEqual(header_bundle.root_names((r / "t/include/proj/x.cuh").resolve(),
                                                  [(r / "t").resolve(), (r / "t/include").resolve()]),
                         ["include/proj/x.cuh", "proj/x.cuh"])

    def test_a_units_list_round_trip(self):
        r = self.root
        read = [write(r / "inc/p/a.cuh", '#include "b.cuh"\n'), write(r / "inc/p/b.cuh", "// b\n")]
        tu = write(r / "unit.cu", "#include <p/a.cuh>\n")
        unit = header_bundle.UnitInput(Path(tu), [str(r / "inc")], read)
        headers = header_bundle.unit_headers(unit, header_bundle.unit_roots(unit, None), "here")
        header_bundle.write_unit_list(r / "list.json", headers, read)
        self.assertEqual(header_bundle.read_unit_list(r / "list.json"), headers)
        text = (r / "list.json").read_text()
        self.assertIn(str((r / "inc/p/b.cuh").resolve()), text, "an unchanged header is named by its file")
        self.assertIn('"bytes"', text, "a rewritten one carries its bytes")


if __name__ == "__main__":
    unittest.main()
