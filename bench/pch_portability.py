#!/usr/bin/env python3
"""Does NVRTC take a precompiled header made on another machine, or after its headers were touched or moved?

A family's PCH could travel in a cache pack or through the fleet only if another machine's NVRTC takes it.
The PCH here is bench/kernels' sort_scan family's (nvrtc_schedules.py builds it the same way), built and
used with ASLR off as kiln-jitd runs, from headers copied to HEADERS (the same absolute path on every
machine, so that only the machine differs):
  write FILE   builds the PCH into FILE (zstd-compressed when FILE ends in .zst), to carry to another machine
  use FILE     one unit of the family, each compile a process of its own: cold; against a PCH built here;
               against FILE (built elsewhere); against a PCH built here whose headers were then touched
               (their mtimes changed, contents not); against one whose headers then moved (another -I path)
Prints a Markdown table: each compile's wall time, and whether NVRTC used the PCH (else its log's first lines).
Needs the CUDA toolkit (NVRTC, nvJitLink, CCCL headers), setarch and libzstd (as kiln does); no GPU.
Usage: bench/pch_portability.py write FILE | use FILE [--toolkit DIR]
"""
import argparse
import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HEADERS = "/tmp/kiln-pch-portability/include"


def zstd():
    """libzstd through ctypes (kiln links it; the zstd command may not be installed)."""
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_isError.restype = ctypes.c_uint
    return lib


def pack(source, target):
    lib, data = zstd(), open(source, "rb").read()
    out = ctypes.create_string_buffer(lib.ZSTD_compressBound(ctypes.c_size_t(len(data))))
    size = lib.ZSTD_compress(out, ctypes.c_size_t(len(out)), data, ctypes.c_size_t(len(data)), 3)
    if lib.ZSTD_isError(ctypes.c_size_t(size)):
        sys.exit("pch_portability: zstd could not compress the PCH")
    with open(target, "wb") as f:
        f.write(out.raw[:size])


def unpack(source, target):
    lib, data = zstd(), open(source, "rb").read()
    n = lib.ZSTD_getFrameContentSize(data, ctypes.c_size_t(len(data)))
    if n >= (1 << 63):  # unknown or an error
        sys.exit(f"pch_portability: {source} is not a zstd frame with its size")
    out = ctypes.create_string_buffer(n)
    size = lib.ZSTD_decompress(out, ctypes.c_size_t(n), data, ctypes.c_size_t(len(data)))
    if lib.ZSTD_isError(ctypes.c_size_t(size)) or size != n:
        sys.exit(f"pch_portability: {source} does not unpack")
    with open(target, "wb") as f:
        f.write(out.raw[:size])


def copy_headers(where):
    shutil.rmtree(where, ignore_errors=True)
    shutil.copytree(os.path.join(HERE, "kernels", "include"), where)


def compile_unit(toolkit, mode, pch, include):
    """One compile (nvrtc_schedules.py --compile) with ASLR off: (wall ms, None) or (wall ms, why it failed)."""
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")
    start = time.perf_counter()
    done = subprocess.run(["setarch", "-R", sys.executable, os.path.join(HERE, "nvrtc_schedules.py"),
                           "--toolkit", toolkit, "--compile", mode, "0", pch, "--include", include],
                          env=env, capture_output=True, text=True, timeout=600)
    ms = (time.perf_counter() - start) * 1000
    why = None if done.returncode == 0 else " ".join(done.stderr.strip().splitlines()[:3])[:300]
    return ms, why


def build_pch(toolkit, pch, include):
    ms, why = compile_unit(toolkit, "prefix", pch, include)
    if why:
        sys.exit(f"pch_portability: no PCH built: {why}")
    return ms


def write(args):
    copy_headers(HEADERS)
    with tempfile.TemporaryDirectory() as tmp:
        pch = os.path.join(tmp, "family.pch")
        ms = build_pch(args.toolkit, pch, HEADERS)
        size = os.path.getsize(pch)
        if args.file.endswith(".zst"):
            pack(pch, args.file)
        else:
            shutil.copyfile(pch, args.file)
    print(f"PCH built in {ms:.0f} ms: {size / 1e6:.1f} MB, written to {args.file} "
          f"({os.path.getsize(args.file) / 1e6:.1f} MB)")


def use(args):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copy_headers(HEADERS)
        foreign = os.path.join(tmp, "foreign.pch")
        if args.file.endswith(".zst"):
            unpack(args.file, foreign)
        else:
            shutil.copyfile(args.file, foreign)
        compile_unit(args.toolkit, "cold", "-", HEADERS)  # the libraries and headers into the page cache
        rows.append(("cold, no PCH", *compile_unit(args.toolkit, "cold", "-", HEADERS)))
        local = os.path.join(tmp, "local.pch")
        build_pch(args.toolkit, local, HEADERS)
        rows.append(("a PCH built on this machine", *compile_unit(args.toolkit, "warm", local, HEADERS)))
        rows.append(("the PCH built on another machine", *compile_unit(args.toolkit, "warm", foreign, HEADERS)))
        for root, _, files in os.walk(HEADERS):  # same bytes, new mtimes
            for name in files:
                os.utime(os.path.join(root, name))
        rows.append(("a PCH built here, its headers touched since", *compile_unit(args.toolkit, "warm", local, HEADERS)))
        moved = os.path.join(tmp, "moved-include")
        copy_headers(moved)
        rows.append(("a PCH built here, its headers moved since", *compile_unit(args.toolkit, "warm", local, moved)))
    print(f"sort_scan family, NVRTC + nvJitLink for sm_90, ASLR off; {os.cpu_count()} cores; "
          f"FILE {args.file}\n")
    print("| compile | wall | PCH |")
    print("|---|---:|---|")
    for label, ms, why in rows:
        used = "-" if label.startswith("cold") else ("used" if why is None else f"not used: {why}")
        print(f"| {label} | {ms:.0f} ms | {used} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["write", "use"])
    parser.add_argument("file")
    parser.add_argument("--toolkit", default=os.environ.get("KILN_TOOLKIT", "/usr/local/cuda"))
    args = parser.parse_args()
    if shutil.which("setarch") is None:
        sys.exit("pch_portability: setarch is not installed (util-linux)")
    return write(args) if args.step == "write" else use(args)


if __name__ == "__main__":
    sys.exit(main())
