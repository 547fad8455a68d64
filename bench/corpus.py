"""The corpus of real run-time sources (bench/corpus/: CuPy's own kernels as CuPy renders them) compiled
cold, side by side in one run: kiln's programs through the batch API and through many Python threads,
with each setting of its defaults; the same units as a spec table; CuPy's RawModule with as many threads
and NVRTC alone, serially in one process; then kiln's estimates against the compile times its JIT pool's
trace measured.

    PYTHONPATH=build/python python3 bench/corpus.py [--units N] [--threads T] [--arch SM] [--parts ...]

Each row is a fresh process with a fresh cache directory (KILN_CACHE_DIR, CUPY_CACHE_DIR). "wall" is from
the first program handed in to the last kernel ready, the programs made beforehand ("make" apart). With
--arch SM, kiln compiles for sm_SM into its cache without loading (no GPU needed; CuPy's rows are left
out). Parts: batch, threads, settings, history, table, cupy, nvrtc, estimates (all by default).

  table  the units as a spec table (bench/corpus_table.py; built --jit-only, no binary embedded) in a
         build configured with -Dcorpus_table=N, N the --units given (1359 for all): the wall of
         `bench_corpus_kiln precompile` in a new process, its units compiled cold by the JIT pool with
         the machine's workers, for --arch (else the GPU's)
  table-settings  the table row with each setting of the JIT's defaults (parts, PCH, slots); not by default
  nvrtc  NVRTC alone, serially in one process: each unit to a cubin for --arch (else the GPU's), its
         options as the programs' (no kiln, no PCH, no pool); wall and that process's CPU
"""

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
_EXTERN_C = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(')
_GLOBAL = re.compile(r'__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(')


def toolkit() -> str:
    return os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")


def select_units(count: int) -> list[dict]:
    """The corpus's units as stored (paths in options still {CUPY_INCLUDE}, {CUDA_INCLUDE}), every k-th so
    that a subset keeps the corpus's mix, each with its `kernels`: the name expressions, else the
    `extern "C"` kernels it defines. bench/corpus_table.py writes the same subset as a spec table."""
    with gzip.open(os.path.join(CORPUS, "cupy_units.jsonl.gz"), "rt") as f:
        units = [json.loads(line) for line in f]
    if 0 < count < len(units):
        step = len(units) / count
        units = [units[int(i * step)] for i in range(count)]
    for u in units:
        u["kernels"] = u["name_expressions"] or _EXTERN_C.findall(u["source"]) or _GLOBAL.findall(u["source"])
    return units


# CuPy's ufuncs list these binary loops for complex types, but no compiler takes their source (there is no
# atan2, copysign, hypot or nextafter of a complex), and CuPy refuses them at their first call. A spec
# table's build checks that each of its units compiles, so the table leaves them out.
_NO_COMPLEX_LOOP = re.compile(r"(arctan2|copysign|hypot|nextafter)\[complex")


def table_units(units: list[dict]) -> list[dict]:
    """The units of `units` a spec table holds (bench/corpus_table.py): those that compile."""
    return [u for u in units if not _NO_COMPLEX_LOOP.match(u["operation"])]


def extract_include(where: str) -> str:
    """CuPy's headers (cupy_include.tgz) under `where`, extracted once; the directory -I names."""
    if not os.path.isdir(os.path.join(where, "include", "cupy")):
        with tarfile.open(os.path.join(CORPUS, "cupy_include.tgz")) as t:
            t.extractall(where)
    return os.path.join(where, "include")


def load_units(count: int) -> list[dict]:
    """select_units(count) with the paths in their options made real."""
    units = select_units(count)
    include = extract_include(os.path.join(tempfile.gettempdir(), "kiln-corpus-include"))
    for u in units:
        u["options"] = [o.replace("{CUPY_INCLUDE}", include).replace("{CUDA_INCLUDE}", os.path.join(toolkit(), "include"))
                        for o in u["options"]]
    return units


def child_kiln(spec: dict) -> None:
    """In a fresh process: the units as kiln programs, made, then compiled (batch or threads)."""
    import kiln  # noqa: PLC0415
    units = load_units(spec["units"])
    t0 = time.perf_counter()
    programs = [kiln.program(u["source"], options=u["options"], name_expressions=u["kernels"], label=u["operation"])
                for u in units]
    made = time.perf_counter()
    if spec.get("sizes"):  # for the estimates' table: each program's unit by its digest, and its size
        with open(spec["sizes"], "w") as f:
            json.dump({p.digest[:16]: {"bytes": len(u["source"]), "kernels": len(u["kernels"]),
                                       "cccl": "<cub/" in u["source"] or "<thrust/" in u["source"]}
                       for p, u in zip(programs, units)}, f)
    failed = 0
    if spec["mode"] == "batch":
        results = kiln.compile_all(programs, arch=spec["arch"] or None)
        failed = sum(not r.ok for r in results)
        errors = [r.error for r in results if not r.ok][:2]
    else:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415
        errors = []

        def one(i):
            try:
                if spec["arch"]:
                    if not programs[i].precompile(spec["arch"]).ok:
                        return "not cached"
                else:
                    for k in units[i]["kernels"]:
                        programs[i].get(k)
                return None
            except kiln.Error as e:
                return str(e)

        with ThreadPoolExecutor(spec["threads"]) as pool:
            errors = [e for e in pool.map(one, range(len(units))) if e]
        failed = len(errors)
    done = time.perf_counter()
    print(json.dumps({"make_ms": (made - t0) * 1e3, "wall_ms": (done - made) * 1e3, "failed": failed,
                      "errors": [e[:300] for e in errors[:2]], "cpu_s": cpu_seconds()}))


def child_nvrtc(spec: dict) -> None:
    """In a fresh process: every unit through NVRTC to a cubin, one after another."""
    import ctypes  # noqa: PLC0415
    units = load_units(spec["units"])
    rtc = ctypes.CDLL(os.path.join(toolkit(), "lib64", "libnvrtc.so"))
    # CUDA 13 keeps CCCL (thrust, cub, libcu++) under include/cccl, where kiln and CuPy add it themselves.
    cccl = [f"-I{d}" for d in [os.path.join(toolkit(), "include", "cccl")] if os.path.isdir(d)]
    errors = []
    t0 = time.perf_counter()
    for u in units:
        prog = ctypes.c_void_p()
        if rtc.nvrtcCreateProgram(ctypes.byref(prog), u["source"].encode(), b"unit.cu", 0, None, None):
            errors.append(f"{u['operation']}: nvrtcCreateProgram failed")
            continue
        for expression in u["name_expressions"]:
            rtc.nvrtcAddNameExpression(prog, expression.encode())
        options = u["options"] + cccl + [f"-arch=sm_{spec['arch']}"]
        argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        size = ctypes.c_size_t(0)
        if rtc.nvrtcCompileProgram(prog, len(options), argv) or rtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)) or not size.value:
            rtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            rtc.nvrtcGetProgramLog(prog, log)
            errors.append(f"{u['operation']}: {log.value.decode(errors='replace').strip()}")
        rtc.nvrtcDestroyProgram(ctypes.byref(prog))
    done = time.perf_counter()
    print(json.dumps({"make_ms": 0, "wall_ms": (done - t0) * 1e3, "failed": len(errors), "errors": [e[:300] for e in errors[:2]],
                      "cpu_s": cpu_seconds()}))


def run_table(tool: str, table: str, units: int, arch: int, env: dict) -> dict:
    """`tool precompile` of the corpus as a spec table, cold, in a new process: its wall and the machine's CPU."""
    if not os.path.exists(tool) or not os.path.exists(table):
        return {"error": f"no {tool}: configure the build with -Dcorpus_table={units or 1359} and build bench_corpus_kiln"}
    with open(table, encoding="utf-8") as f:
        rows = sum(line.strip() == "[[unit]]" for line in f)
    if rows != units:
        return {"error": f"{table} has {rows} units, this run's table {units}: configure -Dcorpus_table with this run's --units"}
    args = [tool, "precompile"] + (["--arch", f"sm_{arch}"] if arch else [])
    started = time.perf_counter()
    busy0 = machine_busy()
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800)
    wall = (time.perf_counter() - started) * 1e3
    machine_cpu = machine_busy() - busy0
    summary = [line for line in out.stdout.splitlines() if line.startswith("registry corpus, ")]
    failed = [line for line in out.stdout.splitlines() if line.startswith(("FAILED", "compiled, not cached"))]
    if out.returncode != 0 and not summary:
        return {"error": f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[-800:]}"}
    return {"make_ms": 0, "wall_ms": wall, "failed": len(failed), "errors": failed[:2] + [out.stderr.strip()[-300:]],
            "machine_cpu_s": machine_cpu, "process_ms": wall}


def device_arch() -> int:
    """The first GPU's architecture (nvidia-smi), for the rows that need one named; 90 without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60)
        return int(out.stdout.split()[0].replace(".", ""))
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return 90


def child_cupy(spec: dict) -> None:
    import cupy  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415
    units = load_units(spec["units"])
    cupy.empty(1)  # the context first, as kiln's rows have theirs made in their first get
    t0 = time.perf_counter()

    def one(u):
        try:
            m = cupy.RawModule(code=u["source"], options=tuple(u["options"]),
                               name_expressions=u["name_expressions"] or None)
            for k in u["kernels"]:
                m.get_function(k)
            return None
        except Exception as e:  # noqa: BLE001
            return str(e)[:300]

    with ThreadPoolExecutor(spec["threads"]) as pool:
        errors = [e for e in pool.map(one, units) if e]
    done = time.perf_counter()
    print(json.dumps({"make_ms": 0, "wall_ms": (done - t0) * 1e3, "failed": len(errors), "errors": errors[:2],
                      "cpu_s": cpu_seconds()}))


def cpu_seconds() -> float:
    """This process's CPU time and its children's (the JIT workers, once reaped)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_child(kind: str, spec: dict, env: dict) -> dict:
    args = [sys.executable, os.path.abspath(__file__), "--child", kind, json.dumps(spec)]
    started = time.perf_counter()
    busy0 = machine_busy()
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    machine_cpu = machine_busy() - busy0
    if out.returncode != 0:
        return {"error": f"exit {out.returncode}: {out.stderr.strip()[-800:]}"}
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["process_ms"] = (time.perf_counter() - started) * 1e3
    row["machine_cpu_s"] = machine_cpu
    return row


def machine_busy() -> float:
    """The machine's CPU seconds so far (/proc/stat): every process, the compile workers included."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
        return (int(fields[0]) + int(fields[1]) + int(fields[2]) + int(fields[5]) + int(fields[6])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def fresh_env(**extra) -> dict:
    env = dict(os.environ)
    env["KILN_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-corpus-")
    env["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-corpus-")
    env["CUDA_CACHE_DISABLE"] = "1"  # nvJitLink's and the driver's own caches would serve later rows
    env.update({k: str(v) for k, v in extra.items()})
    return env


def row(title: str, r: dict) -> str:
    if "error" in r:
        return f"| {title} | failed: {r['error'][:40]} ... {r['error'][-240:]} | | | |"
    failed = f" ({r['failed']} failed: {r['errors'][0][:120] if r['errors'] else ''})" if r["failed"] else ""
    return (f"| {title} | {r['wall_ms']:,.0f}{failed} | {r['make_ms']:,.0f} | {r['machine_cpu_s']:,.1f} |")


def estimates(trace: str, sizes_path: str) -> None:
    """kiln's estimate of each program (from its size: no history in a fresh cache) against what its compile
    took, from the trace of a batch run (nvrtc + link on one worker); and the line through the times by
    size, the estimate's constants as this run would fit them."""
    done, fit = [], []
    with open(sizes_path) as f:
        sizes = json.load(f)
    with open(trace) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "request" and r.get("unit", "").startswith("program/"):
                done.append((r["estimate"], r["nvrtc"] + r["link"]))
                size = sizes.get(r["unit"].split("_")[-1])
                if size and not size["cccl"]:
                    fit.append((size["bytes"] / 1024, r["nvrtc"] + r["link"]))
    if not done:
        print("no requests in the trace")
        return
    ratio = sorted(e / a for e, a in done if a > 0)
    order = sorted(range(len(done)), key=lambda i: -done[i][0])
    actual_rank = {i: r for r, i in enumerate(sorted(range(len(done)), key=lambda i: -done[i][1]))}
    longest = max(range(len(done)), key=lambda i: done[i][1])
    print(f"\n{len(done)} compiles: estimate / actual, median {statistics.median(ratio):.2f}, "
          f"10th-90th percentile {ratio[len(ratio) // 10]:.2f}-{ratio[len(ratio) * 9 // 10]:.2f}, "
          f"worst {min(ratio):.2f} and {max(ratio):.2f}; the longest compile ({done[longest][1]:,.0f} ms) is "
          f"{order.index(longest) + 1}th by estimate; the 10 longest by estimate are ranks "
          f"{sorted(actual_rank[i] + 1 for i in order[:10])} by time")
    if len(fit) > 2:
        mx = statistics.mean(x for x, _ in fit)
        my = statistics.mean(y for _, y in fit)
        b = sum((x - mx) * (y - my) for x, y in fit) / max(1e-9, sum((x - mx) ** 2 for x, _ in fit))
        print(f"units without CCCL ({len(fit)}): ms = {my - b * mx:.0f} + {b:.1f} x KiB of source (least squares)")


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        {"kiln": child_kiln, "cupy": child_cupy, "nvrtc": child_nvrtc}[sys.argv[2]](json.loads(sys.argv[3]))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=0, help="a subset of N units (0: all)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--arch", type=int, default=0, help="compile for sm_ARCH into the cache (no GPU); 0: the device's")
    p.add_argument("--parts", default="batch,threads,settings,history,table,cupy,nvrtc,estimates")
    p.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"),
                   help="the build directory with bench/bench_corpus_kiln (the table row; default: %(default)s)")
    a = p.parse_args()
    parts = a.parts.split(",")
    units = load_units(a.units)
    n_kernels = sum(len(u["kernels"]) for u in units)
    size = sum(len(u["source"]) for u in units)
    print(f"corpus: {len(units)} units, {n_kernels} kernels, {size / 1024:,.0f} KiB of source; {a.threads} threads; "
          f"{os.cpu_count()} cores; {'sm_' + str(a.arch) + ' into the cache' if a.arch else 'made ready on the GPU'}\n")
    print("| run (cold, fresh cache) | wall ms | programs made ms | machine CPU s |")
    print("|---|---|---|---|")
    spec = {"units": a.units, "arch": a.arch, "threads": a.threads, "mode": "batch"}
    scratch = tempfile.mkdtemp(prefix="kiln-corpus-trace-")
    trace, sizes = os.path.join(scratch, "trace.jsonl"), os.path.join(scratch, "sizes.json")
    if "batch" in parts:
        print(row("kiln.compile_all, defaults", run_child("kiln", dict(spec, sizes=sizes), fresh_env(KILN_JIT_TRACE=trace))),
              flush=True)
    for round_ in range(1, int(os.environ.get("KILN_BENCH_ROUNDS", "1"))):
        # Alternating, so that a machine's drift weighs on both alike.
        print(row(f"kiln.compile_all, defaults (round {round_ + 1})", run_child("kiln", spec, fresh_env())), flush=True)
        slots = 2 * (os.cpu_count() or 1)
        print(row(f"kiln.compile_all, KILN_JIT_MACHINE_SLOTS={slots} (round {round_ + 1})",
                  run_child("kiln", spec, fresh_env(KILN_JIT_MACHINE_SLOTS=slots))), flush=True)
    if "threads" in parts:
        print(row(f"kiln, {a.threads} Python threads, defaults", run_child("kiln", dict(spec, mode="threads"), fresh_env())),
              flush=True)
    if "settings" in parts:
        for title, extra in [("KILN_JIT_PCH=0", {"KILN_JIT_PCH": "0"}), ("KILN_JIT_SPLIT=1", {"KILN_JIT_SPLIT": "1"}),
                             ("KILN_JIT_WORKERS=8", {"KILN_JIT_WORKERS": "8"}),
                             ("KILN_JIT_MACHINE_SLOTS=" + str(2 * (os.cpu_count() or 1)), {"KILN_JIT_MACHINE_SLOTS": 2 * (os.cpu_count() or 1)})]:
            print(row(f"kiln.compile_all, {title}", run_child("kiln", spec, fresh_env(**extra))), flush=True)
    if "history" in parts:
        # A second cold start for another architecture: the same cache directory (its history kept), against
        # one without it.
        other = 80 if a.arch != 80 else 90
        env = fresh_env()
        run_child("kiln", dict(spec, arch=a.arch or 90), env)
        print(row(f"kiln.compile_all for sm_{other}, the history of a run for another arch", run_child("kiln", dict(spec, arch=other), env)), flush=True)
        print(row(f"kiln.compile_all for sm_{other}, no history", run_child("kiln", dict(spec, arch=other), fresh_env())), flush=True)
    if "table" in parts:
        print(row(f"the same units as a spec table ({len(table_units(units))}: those that compile), `precompile` (JIT pool, defaults)",
                  run_table(os.path.join(a.build, "bench", "bench_corpus_kiln"), os.path.join(a.build, "bench", "corpus_table.toml"),
                            len(table_units(units)), a.arch, fresh_env())), flush=True)
    if "table-settings" in parts:
        slots = 2 * (os.cpu_count() or 1)
        for title, extra in [("KILN_JIT_SPLIT=0", {"KILN_JIT_SPLIT": "0"}), ("KILN_JIT_SPLIT=1", {"KILN_JIT_SPLIT": "1"}),
                             ("KILN_JIT_PCH=0", {"KILN_JIT_PCH": "0"}), (f"KILN_JIT_MACHINE_SLOTS={slots}", {"KILN_JIT_MACHINE_SLOTS": slots})]:
            print(row(f"the same units as a spec table, `precompile`, {title}",
                      run_table(os.path.join(a.build, "bench", "bench_corpus_kiln"), os.path.join(a.build, "bench", "corpus_table.toml"),
                                len(table_units(units)), a.arch, fresh_env(**extra))), flush=True)
    if "cupy" in parts and not a.arch:
        print(row(f"CuPy RawModule, {a.threads} threads", run_child("cupy", spec, fresh_env())), flush=True)
    if "nvrtc" in parts:
        arch = a.arch or device_arch()
        print(row(f"NVRTC alone, serially in one process (sm_{arch})", run_child("nvrtc", dict(spec, arch=arch), fresh_env())),
              flush=True)
    if "estimates" in parts and os.path.exists(trace) and os.path.exists(sizes):
        estimates(trace, sizes)
        if os.environ.get("OUT"):  # the device machine's output folder: the trace comes back for a closer look
            import shutil  # noqa: PLC0415
            shutil.copy(trace, os.path.join(os.environ["OUT"], "corpus_trace.jsonl"))
            shutil.copy(sizes, os.path.join(os.environ["OUT"], "corpus_sizes.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
