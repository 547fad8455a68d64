"""kiln's benchmark suite: what kiln exists for, side by side with CuPy's kernel cache, in one run.

Runs, from a build configured with -Dbig_registry=true (scripts/gpu-check.sh suite makes one):
  bench_tiers         time to a launchable kernel per tier, three kernels (and exports their sources)
  cupy_tiers.py       CuPy's RawModule on the same sources: cold, disk hit, in-memory hit
  cold_interleaved.py kiln's cold JIT get() and CuPy's cold compile in alternating fresh processes (the
                      ratios the targets are judged by)
  bench_big_registry  200 units: all embedded (eager, lazy), all on disk, all cold through the JIT
                      (1-16 workers, 16 threads); footprint
  bench_jit_scaling   per-unit CUB compile time without and with PCH; workers against threads
  bench_startup       process start to first result; the JIT-built cubin's load against nvcc's
prints every table (Markdown) with the kiln/CuPy ratios, then kiln's targets next to what this run
measured, and writes all rows to OUT/results.csv.

    suite.py BUILD_DIR [--out DIR] [--runs N] [--parts tiers,big,scaling,startup] [--cupy-python PYTHON] [--quick]
"""

import argparse
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(title: str, command: list[str], rows: list[list[str]]) -> str:
    """Runs one benchmark, echoes its output as it comes (a run cut short still shows its finished tables),
    and keeps its Markdown table rows (section, cells...)."""
    print(f"\n## {title}\n", flush=True)
    lines = []
    with tempfile.TemporaryFile(mode="w+") as errors:
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True) as child:
            for line in child.stdout:
                print(line, end="", flush=True)
                lines.append(line.rstrip("\n"))
        if child.returncode not in (0, 77):
            errors.seek(0)
            print(f"\n{title}: exited {child.returncode}\n{errors.read()[-4000:]}", flush=True)
    for line in lines:
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([title] + [cell.strip() for cell in line.strip("|").split("|")])
    return "\n".join(lines)


def machine() -> str:
    """The GPU, its driver, the CUDA toolkit and the CPU count, in one line."""
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True) if shutil.which("nvidia-smi") else None
    gpu_text = gpu.stdout.strip().splitlines()[0].replace(", ", ", driver ") if gpu and gpu.returncode == 0 \
        and gpu.stdout.strip() else "no GPU"
    cuda = "unknown"
    version = Path(os.environ.get("CUDA_PATH", "/usr/local/cuda")) / "version.json"
    if version.exists():
        cuda = json.loads(version.read_text()).get("cuda", {}).get("version", cuda)
    elif shutil.which("nvcc"):
        nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
        cuda = next((part.split()[-1] for part in nvcc.split(",") if "release" in part), cuda)
    return f"{gpu_text}; CUDA {cuda}; {os.cpu_count()} CPU cores"


def ratio_table(kiln_json: Path, cupy_json: Path, rows: list[list[str]]) -> None:
    if not kiln_json.exists() or not cupy_json.exists():
        print("\n(no kiln/CuPy ratios: one side did not run)")
        return
    kiln = {r["kernel"]: r for r in json.loads(kiln_json.read_text())["rows"]}
    cupy = json.loads(cupy_json.read_text())
    title = f"kiln / CuPy {cupy['cupy']} (time to a launchable kernel; below 1 means kiln is faster)"
    print(f"\n## {title}\n")
    header = ["kernel", "cold (JIT / CuPy cold)", "disk hit, new process", "in-memory hit",
              "cold, from main() (context, and CuPy's import, included)"]
    print("| " + " | ".join(header) + " |\n|---|---:|---:|---:|---:|")
    rows.append([title] + header)
    for c in cupy["rows"]:
        k = kiln.get(c["kernel"])
        if not k:
            continue
        cells = [c["label"], f"{k['jit_ms'] / c['cold_ms']:.3f}", f"{k['disk_ms'] / c['disk_ms']:.3f}",
                 f"{k['memory_ns'] / c['memory_ns']:.3f}",
                 f"{(k['context_ms'] + k['jit_ms']) / (c['context_ms'] + c['cold_ms']):.3f}"]
        print("| " + " | ".join(cells) + " |")
        rows.append([title] + cells)


def cell_ms(text: str) -> float | None:
    """'4214 ms' or '5390.0 ms' -> 4214.0; None for anything else."""
    parts = text.split()
    try:
        return float(parts[0]) if len(parts) == 2 and parts[1] == "ms" else None
    except ValueError:
        return None


def find_row(rows: list[list[str]], title_start: str, label_start: str) -> list[str] | None:
    return next((r for r in rows if r[0].startswith(title_start) and len(r) > 2 and r[1].startswith(label_start)), None)


def targets_table(kiln_json: Path, cupy_json: Path, cold_json: Path, rows: list[list[str]]) -> None:
    """Each of kiln's targets for the JIT and cold paths beside this run's measurement."""
    lines: list[list[str]] = []

    def target(what: str, goal: str, value: float | None, limit: float | None, unit: str, note: str = "") -> None:
        if value is None:
            lines.append([what, goal, "not measured in this run", "", note])
            return
        shown = f"{value:.3f}" if unit == "" else f"{value:.3f} {unit}" if value < 10 else f"{value:.0f} {unit}"
        lines.append([what, goal, shown, "" if limit is None else "yes" if value <= limit else "no", note])

    kiln = {r["kernel"]: r for r in json.loads(kiln_json.read_text())["rows"]} if kiln_json.exists() else {}
    cupy = {r["kernel"]: r for r in json.loads(cupy_json.read_text())["rows"]} if cupy_json.exists() else {}
    side_by_side = {r["kernel"]: r for r in json.loads(cold_json.read_text())["rows"]} if cold_json.exists() else {}
    for name, label in (("vector_add", "trivial"), ("block_sum_f32", "CUB example"), ("synthetic_2000", "2,000 lines")):
        k, c, pair = kiln.get(name), cupy.get(name), side_by_side.get(name)
        if pair:  # interleaved in one stretch of the run: the figure the target is judged by
            target(f"cold JIT get, {label}: kiln / CuPy, side by side", "<= 0.7", pair["ratio"], 0.7, "",
                   f"{pair['kiln_ms']:.1f} / {pair['cupy_ms']:.1f} ms; pairs {pair['pair_min']:.3f}-{pair['pair_max']:.3f}; "
                   f"NVRTC and nvJitLink alone {pair['compilers_ms']:.1f} ms, {pair['floor']:.3f} of CuPy's")
        else:
            target(f"cold JIT get, {label}: kiln / CuPy", "<= 0.7", k["jit_ms"] / c["cold_ms"] if k and c else None, 0.7, "")
    scaling = "JIT scaling"
    # The side-by-side median ("3366 ms (3094-3402)"), else the single run of the first table.
    whole = find_row(rows, scaling, "kiln, 16 worker processes") or find_row(rows, scaling, "16 worker processes")
    whole_ms = cell_ms(whole[2].split(" (")[0]) if whole else None
    target("19-unit set, 16 workers", "<= 2000 ms", whole_ms, 2000, "ms")
    alone = find_row(rows, scaling, "the slowest unit alone")
    separate = find_row(rows, scaling, "each unit in a process of its own")
    if whole_ms and alone and cell_ms(alone[2]):
        t = cell_ms(alone[2])
        floor = cell_ms(separate[2].split(" (")[0]) if separate else None
        target("19-unit set, 16 workers, against its slowest unit alone (T)", "<= 1.2 T", whole_ms / t, 1.2,
               "", f"T = {t:.0f} ms ({alone[1].split('(')[-1].split(')')[0]})" +
               (f"; every unit in a process of its own, all at once: {floor / t:.2f} T" if floor else ""))
    big = find_row(rows, "Start-up of a big registry", "(c) all cold through JIT, 16 worker processes")
    big_alone = find_row(rows, "Start-up of a big registry", "(c) the unit it ended with alone (T)")
    target("200-unit registry cold, 16 workers", "<= 2500 ms", cell_ms(big[2]) if big else None, 2500, "ms",
           f"the unit it ended with alone (T, {big_alone[1].split(': ')[-1].split(',')[0]}): {big_alone[2]}"
           if big_alone else "")
    k = kiln.get("block_sum_f32")
    target("embedded first get(), CUB example", "<= 0.15 ms", k["embedded_ms"] if k else None, 0.15, "ms")
    raw = find_row(rows, "Time to a launchable kernel", "lean, as embedded")
    nvcc = find_row(rows, "Time to a launchable kernel", "nvcc -cubin")
    if raw:
        target("  of which the driver alone: the lean cubin's first load in a fresh context", "", cell_ms(raw[3]), None, "ms",
               f"nvcc's own cubin: {nvcc[3]}" if nvcc else "")
    target("disk get(), CUB example, new process", "<= 0.35 ms", k["disk_ms"] if k else None, 0.35, "ms")
    memory = max((r["memory_ns"] for r in kiln.values()), default=None)
    target("in-memory get() (the slowest of the three)", "<= 60 ns", memory, 60, "ns")
    lines.append(["all 59 primitive kernels cold through JIT", "<= 4 s", "scripts/gpu-check.sh jit prints it", "", ""])
    lines.append(["primitives against cub::Device*", ">= 0.97", "scripts/gpu-check.sh bench (bench_prim)", "", ""])
    title = "kiln's targets beside this run"
    print(f"\n## {title}\n\n| target | goal | measured | met | note |\n|---|---|---:|---|---|")
    for line in lines:
        print("| " + " | ".join(line) + " |")
        rows.append([title] + line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cupy-python", default=sys.executable, help="a python3 that can import cupy")
    parser.add_argument("--parts", default="tiers,big,scaling,startup",
                        help="which parts to run, of tiers (kiln and CuPy), big, scaling, startup")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: one run each, 2 JIT workers only (not for the record)")
    args = parser.parse_args()
    # nvJitLink (kiln) and the driver (CuPy's PTX, if any) keep compiled SASS in ~/.nv/ComputeCache and read
    # it back in later processes: off, so that a cold row compiles in every run (docs/DESIGN.md, "The
    # driver's JIT cache").
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    parts = set(args.parts.split(","))
    if parts - {"tiers", "big", "scaling", "startup"}:
        parser.error(f"unknown parts: {', '.join(sorted(parts - {'tiers', 'big', 'scaling', 'startup'}))}")
    bench = args.build / "bench"
    if not (bench / "bench_big_registry").exists():
        print(f"suite.py: {bench}/bench_big_registry is missing: configure {args.build} with "
              "-Dbig_registry=true (scripts/gpu-check.sh suite does) and build it")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    # KILN_COMMIT names the commit where the tree is a copy whose .git may lag (the device machine's).
    commit = os.environ.get("KILN_COMMIT") or subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# kiln benchmark suite, {datetime.date.today()}, commit {commit or 'unknown'}\n\n{machine()}", flush=True)
    rows: list[list[str]] = []
    sources, kiln_json, cupy_json = args.out / "sources.json", args.out / "kiln_tiers.json", args.out / "cupy_tiers.json"
    cold_json = args.out / "cold_interleaved.json"
    if "tiers" in parts:
        run("Time to a launchable kernel, per tier (kiln)",
            [str(bench / "bench_tiers"), "--runs", str(args.runs), "--export", str(sources), "--json", str(kiln_json)],
            rows)
        if sources.exists():
            run("The same sources through CuPy",
                [args.cupy_python, str(HERE / "cupy_tiers.py"), str(sources), "--runs", str(max(3, args.runs - 2)),
                 "--json", str(cupy_json)], rows)
        ratio_table(kiln_json, cupy_json, rows)
        if cupy_json.exists():
            run("Cold gets side by side: kiln and CuPy interleaved",
                [sys.executable, str(HERE / "cold_interleaved.py"), str(bench / "bench_tiers"), str(sources),
                 "--rounds", "1" if args.quick else str(args.runs), "--cupy-python", args.cupy_python,
                 "--json", str(cold_json)], rows)
    if "big" in parts:
        run("Start-up of a big registry (200 units)",
            [str(bench / "bench_big_registry"), "--runs", str(max(1 if args.quick else 3, args.runs - 2)),
             "--jit-runs", "1" if args.quick else "3"] + (["--workers", "2"] if args.quick else []), rows)
    if "scaling" in parts:
        run("JIT scaling and PCH", [str(bench / "bench_jit_scaling")] + (["2"] if args.quick else []), rows)
    if "startup" in parts:
        run("Process start to first result; JIT-built against nvcc's cubin",
            [str(bench / "bench_startup"), "3" if args.quick else "7"], rows)
    targets_table(kiln_json, cupy_json, cold_json, rows)
    with open(args.out / "results.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["table", "row", "values..."])
        writer.writerows(rows)
    print(f"\nall rows: {args.out / 'results.csv'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
