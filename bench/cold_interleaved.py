"""kiln's cold JIT get() against CuPy's cold compile of the same source, interleaved: for each kernel of
the sources bench_tiers exports, ROUNDS pairs of fresh processes (one kiln, one CuPy, each with an empty
cache directory), in the order kiln-CuPy, CuPy-kiln, ... so that a machine that speeds up or slows down
during the run weighs on both alike. The machine's own drift between runs of a day (1.5-2x on the same
source, bench/RESULTS.md) is larger than the targets' margins; side by side it cancels.

Each kiln process is `bench_tiers --child 0 jit REGISTRY KERNEL DIR` (the time from the context to a
launchable kernel), each CuPy one `cupy_tiers.py --child` (the same, for RawModule). Prints, per kernel:
the medians, their ratio, the median and range of the pairs' own ratios, and the compilers' own part of
kiln's get (NVRTC and nvJitLink on the worker, from the pool's trace) against CuPy's whole cold compile:
the ratio no cold get from source can go below with these compilers and options.

    cold_interleaved.py BENCH_TIERS SOURCES.json [--rounds N] [--json OUT]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def kiln_cold(bench_tiers: str, registry: str, kernel: str) -> tuple[float, float]:
    """The cold get() (ms after the context), and the compilers' part of it: NVRTC and nvJitLink on the
    worker, from the pool's trace (the worker's warm-up, done while the context came up, left out)."""
    with tempfile.TemporaryDirectory(prefix="kiln-bench-cold-") as cache:
        trace = Path(cache) / "trace.jsonl"
        out = subprocess.run([bench_tiers, "--child", "0", "jit", registry, kernel, cache], capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, KILN_JIT_TRACE=str(trace)))
        requests = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
    if out.returncode != 0:
        raise RuntimeError(f"kiln child exited {out.returncode}: {out.stderr.strip()[-1500:]}")
    compilers = sum(r["nvrtc"] + r["link"] for r in requests
                    if r.get("event") == "request" and r.get("unit") != "kiln/warm-up")
    return float(out.stdout.split()[1]), compilers


def cupy_cold(python: str, sources: str, index: int) -> float:
    with tempfile.TemporaryDirectory(prefix="kiln-bench-cupy-") as cache:
        out = subprocess.run([python, str(HERE / "cupy_tiers.py"), "--child", sources, str(index)],
                             env=dict(os.environ, CUPY_CACHE_DIR=cache), capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"CuPy child exited {out.returncode}: {out.stderr.strip()[-1500:]}")
    return float(out.stdout.split()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_tiers")
    parser.add_argument("sources")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cupy-python", default=sys.executable)
    parser.add_argument("--json", help="write the medians and ratios here")
    args = parser.parse_args()
    os.environ["CUDA_CACHE_DISABLE"] = "1"  # every cold row compiles (docs/DESIGN.md, "The driver's JIT cache")
    specs = json.loads(Path(args.sources).read_text())
    print(f"kiln cold JIT get() and CuPy's cold compile, {args.rounds} interleaved pairs of fresh processes per "
          "kernel; times after the context\n")
    print("| kernel | kiln, median (range) | of which the compilers | CuPy, median (range) | ratio of medians "
          "| pairs' ratios: median (range) | the compilers alone / CuPy |")
    print("|---|---:|---:|---:|---:|---:|---:|", flush=True)
    results = []
    for index, spec in enumerate(specs):
        kiln, compilers, cupy, pairs, floors = [], [], [], [], []
        for r in range(args.rounds):
            order = ("kiln", "cupy") if r % 2 == 0 else ("cupy", "kiln")
            got = {}
            for side in order:
                got[side] = (kiln_cold(args.bench_tiers, spec["registry"], spec["kernel"]) if side == "kiln"
                             else cupy_cold(args.cupy_python, args.sources, index))
            kiln.append(got["kiln"][0])
            compilers.append(got["kiln"][1])
            cupy.append(got["cupy"])
            pairs.append(got["kiln"][0] / got["cupy"])
            floors.append(got["kiln"][1] / got["cupy"])
        row = {"kernel": spec["kernel"], "label": spec["label"], "kiln_ms": statistics.median(kiln),
               "compilers_ms": statistics.median(compilers), "cupy_ms": statistics.median(cupy),
               "ratio": statistics.median(kiln) / statistics.median(cupy),
               "pair_ratio": statistics.median(pairs), "pair_min": min(pairs), "pair_max": max(pairs),
               "floor": statistics.median(floors), "kiln_all": kiln, "compilers_all": compilers, "cupy_all": cupy}
        results.append(row)
        print(f"| {spec['label']} | {row['kiln_ms']:.1f} ms ({min(kiln):.1f}-{max(kiln):.1f}) "
              f"| {row['compilers_ms']:.1f} ms | {row['cupy_ms']:.1f} ms ({min(cupy):.1f}-{max(cupy):.1f}) "
              f"| {row['ratio']:.3f} | {row['pair_ratio']:.3f} ({row['pair_min']:.3f}-{row['pair_max']:.3f}) "
              f"| {row['floor']:.3f} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rounds": args.rounds, "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
