"""The header bundle for the JIT tier: headers under the units' roots are stored once, named by root,
host-only headers are left out, and the compressed frame decompresses to the same bytes."""

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


class HeaderBundle(unittest.TestCase):
    def test_roots_dedupe_and_order(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "toolkit" / "include" / "cccl" / "cub").mkdir(parents=True)
            (root / "toolkit" / "include" / "cuda_fp16.h").write_text("// fp16\n")
            (root / "toolkit" / "include" / "cccl" / "cub" / "cub.cuh").write_text("// cub\n")
            (root / "a").mkdir()
            (root / "a" / "mine.cuh").write_text("// mine\n")
            (root / "host.h").write_text("// host only\n")
            cub = str(root / "toolkit" / "include" / "cccl" / "cub" / "cub.cuh")
            units = [([str(root / "a")], [str(root / "a" / "mine.cuh"), cub, str(root / "host.h")]),
                     ([], [cub, str(root / "toolkit" / "include" / "cuda_fp16.h")])]
            bundle = header_bundle.build_bundle(units, root / "toolkit")
            names = [h[0] for h in bundle.headers]
            # roots: a, then the toolkit's cccl (searched before include, which contains it), then include
            self.assertEqual(bundle.roots, [(root / "a").resolve(), (root / "toolkit/include/cccl").resolve(),
                                            (root / "toolkit/include").resolve()])
            self.assertEqual(names, ["r0/mine.cuh", "r1/cub/cub.cuh", "r2/cuda_fp16.h"])  # cub once; host.h left out
            self.assertEqual(bundle.unit_roots, [[0, 1, 2], [1, 2]])
            self.assertEqual(bundle.unit_headers, [[0, 1], [1, 2]])
            _, offset, size = bundle.headers[1]
            self.assertEqual(bytes(bundle.raw[offset:offset + size]), b"// cub\n")

            out = root / "b.zst"
            compressed_size, digest = header_bundle.compress(bundle.raw, out)
            self.assertEqual(out.stat().st_size, compressed_size)
            self.assertRegex(digest, "^[0-9a-f]{64}$")
            self.assertEqual(decompress(out.read_bytes(), len(bundle.raw)), bytes(bundle.raw))


if __name__ == "__main__":
    unittest.main()
