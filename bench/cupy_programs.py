"""CuPy's RawModule on the programs bench_programs exports (--export SOURCES.json): the same source,
options and name expression, for the table beside kiln's.

For each program, in fresh processes: cold (CUPY_CACHE_DIR an empty directory), then its disk hit (the
same directory, a new process), and there the in-memory hit: get_function of the module kept (by
handle), and a new RawModule of the same text then get_function (by content). Each child makes its
CUDA context first and times it apart, as bench_programs does.

    cupy_programs.py SOURCES.json [--runs N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(spec_path: str, index: int, hits: bool) -> None:
    import cupy  # noqa: PLC0415 (the import is part of a fresh process, before the context)

    cupy.cuda.Device(0).use()
    cupy.empty(1)  # makes the context
    with open(spec_path) as f:
        spec = json.load(f)[index]
    options = tuple(spec["options"])
    t0 = time.perf_counter()
    module = cupy.RawModule(code=spec["source"], options=options, name_expressions=[spec["expression"]])
    module.get_function(spec["expression"])
    first_ms = (time.perf_counter() - t0) * 1e3
    handle_ns = content_ns = 0.0
    if hits:
        n = 20000
        t1 = time.perf_counter()
        for _ in range(n):
            module.get_function(spec["expression"])
        handle_ns = (time.perf_counter() - t1) / n * 1e9
        t2 = time.perf_counter()
        for _ in range(n):
            cupy.RawModule(code=spec["source"], options=options,
                           name_expressions=[spec["expression"]]).get_function(spec["expression"])
        content_ns = (time.perf_counter() - t2) / n * 1e9
    print(f"{first_ms:.6f} {handle_ns:.3f} {content_ns:.3f}")


def run_child(spec_path: str, index: int, hits: bool, cache_dir: str) -> list[float]:
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    args = [sys.executable, __file__, "--child-hits" if hits else "--child", spec_path, str(index)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"exited {out.returncode}: {out.stderr.strip()[-1500:]}")
    return [float(x) for x in out.stdout.split()]


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] in ("--child", "--child-hits"):
        child(sys.argv[2], int(sys.argv[3]), sys.argv[1] == "--child-hits")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with open(args.sources) as f:
        specs = json.load(f)
    print("| program (CuPy RawModule) | cold, new process (ms) | disk hit, new process (ms) | memory, by handle (ns) | by content (ns) |")
    print("|---|---|---|---|---|")
    for i, spec in enumerate(specs):
        cold, disk, handle, content = [], [], [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as d:
                cold.append(run_child(args.sources, i, False, d)[0])
                first, by_handle, by_content = run_child(args.sources, i, True, d)
                disk.append(first)
                handle.append(by_handle)
                content.append(by_content)
        print(f"| {spec['name']} | {statistics.median(cold):.1f} | {statistics.median(disk):.3f} | "
              f"{statistics.median(handle):.1f} | {statistics.median(content):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
