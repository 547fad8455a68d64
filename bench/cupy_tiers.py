"""CuPy's kernel cache on the sources bench_tiers exports: the same translation units, options and name
expressions kiln's JIT tier hands NVRTC.

For each kernel, in fresh processes: cold (CUPY_CACHE_DIR an empty directory), then its disk hit (the
same directory, a new process), and in the disk-hit process a second get_function of the same module
(CuPy's in-memory hit). Each child makes its CUDA context first and times it apart, as bench_tiers does.

    cupy_tiers.py SOURCES.json [--runs N] [--json OUT]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(spec_path: str, index: int) -> None:
    t_main = time.perf_counter()
    import cupy  # noqa: PLC0415 (the import is part of what a fresh process pays, before the context)

    cupy.cuda.Device(0).use()
    cupy.empty(1)  # makes the context
    t_context = time.perf_counter()
    with open(spec_path) as f:
        spec = json.load(f)[index]
    options = tuple(spec["options"]) + ("-default-device",) + tuple("-I" + d for d in spec["include_dirs"])
    module = cupy.RawModule(code=spec["source"], options=options, name_expressions=[spec["expression"]])
    module.get_function(spec["expression"])
    t_ready = time.perf_counter()
    n = 10000
    t0 = time.perf_counter()
    for _ in range(n):
        module.get_function(spec["expression"])
    per_get_ns = (time.perf_counter() - t0) / n * 1e9
    print(f"{(t_context - t_main) * 1e3:.6f} {(t_ready - t_context) * 1e3:.6f} {per_get_ns:.3f}")


def run_child(spec_path: str, index: int, cache_dir: str) -> list[float]:
    env = dict(os.environ, CUPY_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, __file__, "--child", spec_path, str(index)], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"exited {out.returncode}: {out.stderr.strip()[-1500:]}")
    return [float(x) for x in out.stdout.split()]


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", help="write the medians here")
    args = parser.parse_args()
    with open(args.sources) as f:
        specs = json.load(f)
    try:
        import cupy  # noqa: F401, PLC0415
        version = cupy.__version__
    except ImportError as e:
        print(f"cupy_tiers: CuPy is not installed for {sys.executable} ({e}); nothing timed")
        return 77

    results = []
    print(f"CuPy {version} (RawModule, NVRTC), medians of {args.runs} fresh processes; times after the context\n")
    print("| kernel | context (+ import) | cold | disk, new process | in-memory |")
    print("|---|---:|---:|---:|---:|")
    for index, spec in enumerate(specs):
        cold, disk, memory, context = [], [], [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="kiln-bench-cupy-") as cache:
                try:
                    first = run_child(args.sources, index, cache)
                    second = run_child(args.sources, index, cache)
                except RuntimeError as e:
                    print(f"| {spec['label']} | CuPy failed: {str(e).splitlines()[-1]} | | | |", flush=True)
                    print(e, file=sys.stderr)
                    break
            context.append(first[0])
            cold.append(first[1])
            disk.append(second[1])
            memory.append(second[2])
        if not cold:
            continue
        row = {"kernel": spec["kernel"], "label": spec["label"], "context_ms": statistics.median(context),
               "cold_ms": statistics.median(cold), "disk_ms": statistics.median(disk),
               "memory_ns": statistics.median(memory)}
        results.append(row)
        print(f"| {spec['label']} | {row['context_ms']:.1f} ms | {row['cold_ms']:.1f} ms | {row['disk_ms']:.3f} ms "
              f"| {row['memory_ns']:.1f} ns |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cupy": version, "rows": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
