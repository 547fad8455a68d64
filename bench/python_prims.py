"""kiln from Python against CuPy and against kiln's C++: six tables.

1. First call of each primitive family in a fresh Python process, import and CUDA context excluded (the
   arrays are made first): kiln's one-shot call, to its result on the host, beside CuPy's own first call of
   the same operation (cupy.cumsum for the scan, cupy.sort for the sorts, ...) with its kernel cache cold
   (an empty CUPY_CACHE_DIR) and warm (the same directory, a new process).
2. The same first call of each family that needs temporary storage, with that storage from CuPy's pool
   (what a one-shot call on CuPy arrays does) and from the driver's stream-ordered pool (cuMemAllocAsync,
   what it does for other arrays or another stream than CuPy's current one): their difference is the cost
   of the driver pool's first use in a process.
3. Steady state on CuPy arrays at 2^24 and 2^28 items: a kiln plan called from Python, back to back on one
   stream, against the same plan called from C++ in a loop (the C++ plan's throughput), by CUDA events.
4. Launch overhead: an empty kernel of a run-time program launched from Python (kiln.Kernel) against CuPy's
   RawKernel on the same source, host microseconds per launch; the array passed as a CuPy array, then as
   its address (an int), which leaves out the reading of an array.
5. A run-time program: cold (empty caches), disk hit in a new process, and in-memory hits (by handle, by
   content), against CuPy's RawModule on the same source.
6. One-shot calls against CuPy's own operation of the same kind, on CuPy arrays from 2^20 items: each call
   alone between CUDA events on the default stream (the GPU idle before it, so the host work before and
   between its kernels shows), calls of the two alternating, medians; the ratio is kiln's speed over CuPy's.

    python3 bench/python_prims.py [--runs N] [--sizes 24,28] [--oneshot-sizes 20,24,26]
                                  [--parts first,temp,steady,launch,program,oneshot]

Run with PYTHONPATH=build/python (the package as built; its primitives embedded for this GPU's architecture,
else the first calls include a disk load or a compile: the table says which tier served them).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# The families, each timed through its one-shot call (kiln_call) or a plan (make_plan); CuPy's operation of the
# same kind where it has one (cupy_call), on the same arrays (arrays()).
FAMILIES = ["exclusive_sum", "reduce_sum", "segmented_reduce", "merge_sort_pairs", "radix_sort_pairs",
            "unique_by_key", "select_indices", "lower_bound", "upper_bound", "segmented_sort"]
CUPY_OP = {"exclusive_sum": "cupy.cumsum", "reduce_sum": "cupy.sum", "segmented_reduce": None,
           "merge_sort_pairs": "cupy.argsort", "radix_sort_pairs": "cupy.argsort", "unique_by_key": "cupy.unique",
           "select_indices": "cupy.flatnonzero", "lower_bound": "cupy.searchsorted",
           "upper_bound": "cupy.searchsorted", "segmented_sort": "cupy.sort (rows)"}
SEGMENT = 1024  # items per segment of the segmented families


def arrays(cupy, family, n):
    """The inputs of a family at n items (made on the device, on the default stream)."""
    rng = cupy.random.default_rng(1)
    ints = rng.integers(0, 1 << 20, n, dtype=cupy.int64)
    if family == "exclusive_sum":
        return (ints.astype(cupy.int32),)
    if family == "reduce_sum":
        return (ints.astype(cupy.float64),)
    if family in ("segmented_reduce", "segmented_sort"):
        offsets = cupy.arange(0, n + 1, SEGMENT, dtype=cupy.int32)
        return ints.astype(cupy.float64), offsets
    if family == "merge_sort_pairs":
        return ints.astype(cupy.uint64), cupy.arange(n, dtype=cupy.int32)
    if family == "radix_sort_pairs":
        return ints.astype(cupy.uint64), cupy.arange(n, dtype=cupy.int32)
    if family == "unique_by_key":
        return cupy.sort(ints // 16).astype(cupy.uint64), cupy.arange(n, dtype=cupy.int32)
    if family == "select_indices":
        return (ints & 1) == 1, None
    if family in ("lower_bound", "upper_bound"):
        return cupy.sort(ints), ints[: max(n // 4, 1)].copy()
    raise ValueError(family)


def kiln_call(kiln, family, args):
    if family == "segmented_reduce":
        return kiln.segmented_reduce(args[0], args[1], op="sum")
    if family == "segmented_sort":
        return kiln.segmented_sort(args[0], args[1])
    return getattr(kiln, family)(*args)


def cupy_call(cupy, family, args):
    if family == "exclusive_sum":
        return cupy.cumsum(args[0])
    if family == "reduce_sum":
        return cupy.sum(args[0])
    if family in ("merge_sort_pairs", "radix_sort_pairs"):
        return cupy.argsort(args[0])
    if family == "unique_by_key":
        return cupy.unique(args[0], return_index=True)
    if family == "select_indices":
        return cupy.flatnonzero(args[0])
    if family == "lower_bound":
        return cupy.searchsorted(args[0], args[1], side="left")
    if family == "upper_bound":
        return cupy.searchsorted(args[0], args[1], side="right")
    if family == "segmented_sort":
        return cupy.sort(args[0].reshape(-1, SEGMENT), axis=-1)
    raise ValueError(family)


def child_first(library, family):
    """One fresh process: the first call of `family`, in ms, to its result on the host. library "kiln-driver"
    is kiln with a one-shot call's temporary storage from the driver's pool (cuMemAllocAsync)."""
    import cupy

    cupy.cuda.Device(0).use()
    args = arrays(cupy, family, 1 << 16)
    cupy.cuda.Device().synchronize()  # context, data and CuPy's own set-up done
    if library in ("kiln", "kiln-driver"):
        import kiln

        kiln.primitives._library_temp = library == "kiln"
        t0 = time.perf_counter()
        out = kiln_call(kiln, family, args)
        first = out[0] if isinstance(out, tuple) else out
        cupy.asnumpy(first)
        ms = (time.perf_counter() - t0) * 1e3
        sources = sorted({p.source for p in kiln.primitives._made.values()})
        print(json.dumps({"ms": ms, "source": ", ".join(sources)}))
    else:
        t0 = time.perf_counter()
        out = cupy_call(cupy, family, args)
        cupy.asnumpy(out[0] if isinstance(out, tuple) else out)
        print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3}))


def run_child(args, env=None):
    out = subprocess.run([sys.executable, __file__] + args, env=dict(os.environ, **(env or {})),
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {out.returncode}: {out.stderr.strip()[-1500:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_calls(runs):
    print("\n## First call in a fresh process (import and context excluded; 2^16 items; ms to the result on the "
          "host)\n")
    print("| family | kiln | served by | CuPy op | CuPy, cold cache | CuPy, warm cache |")
    print("|---|---|---|---|---|---|")
    for family in FAMILIES:
        kiln_ms, sources = [], set()
        for _ in range(runs):
            r = run_child(["--child-first", "kiln", family])
            kiln_ms.append(r["ms"])
            sources.add(r["source"])
        cold = warm = "—"
        if CUPY_OP[family]:
            cold_ms, warm_ms = [], []
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as d:
                    cold_ms.append(run_child(["--child-first", "cupy", family], {"CUPY_CACHE_DIR": d})["ms"])
                    warm_ms.append(run_child(["--child-first", "cupy", family], {"CUPY_CACHE_DIR": d})["ms"])
            cold, warm = f"{statistics.median(cold_ms):.1f}", f"{statistics.median(warm_ms):.2f}"
        print(f"| {family} | {statistics.median(kiln_ms):.3f} | {', '.join(sorted(sources))} | "
              f"{CUPY_OP[family] or '—'} | {cold} | {warm} |", flush=True)


def temp_first_calls(runs):
    print("\n## First call, temporary storage from CuPy's pool or from the driver's (cuMemAllocAsync) (2^16 items; "
          "ms to the result on the host, fresh processes)\n")
    print("| family | temp from CuPy's pool | temp by cuMemAllocAsync | difference |")
    print("|---|---|---|---|")
    for family in FAMILIES:
        if family in ("lower_bound", "upper_bound"):  # no temporary storage
            continue
        pool = statistics.median([run_child(["--child-first", "kiln", family])["ms"] for _ in range(runs)])
        driver = statistics.median([run_child(["--child-first", "kiln-driver", family])["ms"] for _ in range(runs)])
        print(f"| {family} | {pool:.3f} | {driver:.3f} | {driver - pool:.3f} |", flush=True)


def steady(log2_sizes, reps):
    import cupy
    import kiln

    print("\n## Steady state on CuPy arrays (a plan, back to back on one stream; CUDA events around the batch)\n")
    print("| family | type | items | Python (ms/call) | C++ loop (ms/call) | Python / C++ |")
    print("|---|---|---|---|---|---|")
    stream = cupy.cuda.Stream(non_blocking=True)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    for log2 in log2_sizes:
        n = 1 << log2
        for family in FAMILIES:
            args = arrays(cupy, family, n)
            plan, call, sizes = make_plan(cupy, kiln, family, args, n)
            temp = cupy.empty(max(plan.temp_bytes(*sizes), 1), cupy.uint8)
            cupy.cuda.Device().synchronize()
            pointers = [kiln.primitives._Array(a, "x", family).pointer for a in call]
            n_m = plan._sizes(sizes)  # (items, segments or needles), as the C++ plan takes them

            def python_loop():
                for _ in range(reps):
                    plan(temp, *call, *sizes, stream=stream)

            def cxx_loop():
                plan._native._run_repeated(pointers, *n_m, temp.data.ptr, temp.nbytes, stream, reps)

            times = {"python": [], "cxx": []}
            python_loop()
            cxx_loop()  # warm both
            for _ in range(5):  # alternating, medians
                for name, loop in (("python", python_loop), ("cxx", cxx_loop)):
                    start.record(stream)
                    loop()
                    stop.record(stream)
                    stop.synchronize()
                    times[name].append(cupy.cuda.get_elapsed_time(start, stop) / reps)
            py, cxx = statistics.median(times["python"]), statistics.median(times["cxx"])
            print(f"| {family} | {plan.dtype} | 2^{log2} | {py:.4f} | {cxx:.4f} | {py / cxx:.3f} |", flush=True)
            del args, call, temp, plan, python_loop, cxx_loop  # the closures hold the arrays too
            cupy.get_default_memory_pool().free_all_blocks()


def make_plan(cupy, kiln, family, args, n):
    """A plan of `family` and the arrays and sizes of its call."""
    if family == "exclusive_sum":
        call = (args[0], cupy.empty_like(args[0]))
        return kiln.make_exclusive_sum(*call), call, (n,)
    if family == "reduce_sum":
        call = (args[0], cupy.empty(1, args[0].dtype))
        return kiln.make_reduce_sum(*call), call, (n,)
    if family == "segmented_reduce":
        segments = args[1].size - 1
        call = (args[0], cupy.empty(segments, args[0].dtype), args[1])
        return kiln.make_segmented_reduce(*call), call, (segments,)
    if family == "merge_sort_pairs":
        # in place: each call sorts sorted data after the first (CUB's merge sort costs the same on it)
        return kiln.make_merge_sort_pairs(*args), args, (n,)
    if family == "radix_sort_pairs":
        call = (args[0], cupy.empty_like(args[0]), args[1], cupy.empty_like(args[1]))
        return kiln.make_radix_sort_pairs(*call), call, (n,)
    if family == "unique_by_key":
        call = (args[0], args[1], cupy.empty_like(args[0]), cupy.empty_like(args[1]), cupy.empty(1, cupy.uint64))
        return kiln.make_unique_by_key(*call), call, (n,)
    if family == "select_indices":
        call = (args[0], cupy.empty(n, cupy.int64), cupy.empty(1, cupy.int64))
        return kiln.make_select_indices(*call), call, (n,)
    if family in ("lower_bound", "upper_bound"):
        call = (args[0], args[1], cupy.empty(args[1].size, cupy.int64))
        make = kiln.make_lower_bound if family == "lower_bound" else kiln.make_upper_bound
        return make(*call), call, (n, args[1].size)
    if family == "segmented_sort":
        call = (args[0], cupy.empty_like(args[0]), args[1])
        return kiln.make_segmented_sort(*call), call, (n, args[1].size - 1)
    raise ValueError(family)


def oneshot(log2_sizes, calls):
    import cupy
    import kiln

    print("\n## One-shot calls against CuPy's own operation (CuPy arrays, default stream; CUDA events around each "
          f"call, median of {calls})\n")
    print("| family | items | kiln one-shot (ms) | CuPy op | CuPy (ms) | kiln's speed / CuPy's |")
    print("|---|---|---|---|---|---|")
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()

    def timed(call):
        cupy.cuda.Device().synchronize()
        start.record()
        out = call()
        stop.record()
        stop.synchronize()
        del out
        return cupy.cuda.get_elapsed_time(start, stop)

    for log2 in log2_sizes:
        n = 1 << log2
        for family in FAMILIES:
            if not CUPY_OP[family]:
                continue
            args = arrays(cupy, family, n)
            cupy.cuda.Device().synchronize()

            def kiln_once():
                return kiln_call(kiln, family, args)

            def cupy_once():
                return cupy_call(cupy, family, args)

            for _ in range(3):  # kernels loaded, pools warm
                timed(kiln_once)
                timed(cupy_once)
            times = {"kiln": [], "cupy": []}
            for _ in range(calls):
                times["kiln"].append(timed(kiln_once))
                times["cupy"].append(timed(cupy_once))
            ours, theirs = statistics.median(times["kiln"]), statistics.median(times["cupy"])
            print(f"| {family} | 2^{log2} | {ours:.4f} | {CUPY_OP[family]} | {theirs:.4f} | {theirs / ours:.2f} |",
                  flush=True)
            del args, kiln_once, cupy_once
            cupy.get_default_memory_pool().free_all_blocks()


NOOP = r'''extern "C" __global__ void noop(float* p, int n) { if (n < 0) p[0] = 0; }'''


def launch_overhead(launches=20000):
    import cupy
    import numpy as np

    import kiln

    print("\n## Launch overhead of a run-time program's kernel (host µs per launch, one stream)\n")
    print("| launcher | µs per launch |")
    print("|---|---|")
    x = cupy.zeros(16, cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    kernel = kiln.program(NOOP, name_expressions=["noop"], label="bench/noop").get("noop")
    raw = cupy.RawKernel(NOOP, "noop")
    by_array = (x, np.int32(16))
    by_address = (x.data.ptr, np.int32(16))

    def kiln_launch(args):
        def loop():
            for _ in range(launches):
                kernel(1, 32, args, stream=stream)
        return loop

    def cupy_launch(args):
        def loop():
            for _ in range(launches):
                raw((1,), (32,), args, stream=stream)
        return loop

    loops = {"kiln.Kernel": kiln_launch(by_array), "cupy.RawKernel": cupy_launch(by_array),
             "kiln.Kernel, address as int": kiln_launch(by_address),
             "cupy.RawKernel, address as int": cupy_launch(by_address)}
    results = {name: [] for name in loops}
    for loop in loops.values():
        loop()
    stream.synchronize()
    for _ in range(5):
        for name, loop in loops.items():
            t0 = time.perf_counter()
            loop()
            results[name].append((time.perf_counter() - t0) / launches * 1e6)
            stream.synchronize()
    for name, values in results.items():
        print(f"| {name} | {statistics.median(values):.2f} |")


SAXPY = r'''
template <typename T>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}'''
EXPRESSION = "saxpy<float>"


def per_call_us(call, times):
    t0 = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - t0) / times * 1e6


def child_program(library):
    """One fresh process: the time to a launchable kernel of SAXPY (ms); then in-memory hits (µs), by the
    handle kept and by the same content made again."""
    import cupy

    cupy.cuda.Device(0).use()
    cupy.empty(1)
    cupy.cuda.Device().synchronize()
    if library == "kiln":
        import kiln

        def by_content():
            return kiln.program(SAXPY, name_expressions=[EXPRESSION], label="bench/saxpy")

        t0 = time.perf_counter()
        program = kiln.Program(SAXPY, name_expressions=[EXPRESSION], label="bench/saxpy")
    else:
        def by_content():
            return cupy.RawModule(code=SAXPY, name_expressions=[EXPRESSION])

        t0 = time.perf_counter()
        program = by_content()

    def get(made):
        return made.get(EXPRESSION) if library == "kiln" else made.get_function(EXPRESSION)

    kernel = get(program)
    first = (time.perf_counter() - t0) * 1e3
    source = kernel.source if library == "kiln" else "-"  # the tier that made its binary
    handle = per_call_us(lambda: get(program), 2000)
    content = per_call_us(lambda: get(by_content()), 2000)
    print(json.dumps({"ms": first, "handle_us": handle, "content_us": content, "source": source}))


def programs(runs):
    print("\n## A run-time program (saxpy<float>): time to a launchable kernel\n")
    print("| library | cold, new process (ms) | disk hit, new process (ms) | memory, by handle (µs) | "
          "by content (µs) |")
    print("|---|---|---|---|---|")
    for library, variable in (("kiln", "KILN_CACHE_DIR"), ("cupy", "CUPY_CACHE_DIR")):
        cold, disk, handle, content = [], [], [], []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as d:
                cold.append(run_child(["--child-program", library], {variable: d})["ms"])
                r = run_child(["--child-program", library], {variable: d})
                disk.append(r["ms"])
                handle.append(r["handle_us"])
                content.append(r["content_us"])
        name = "kiln.Program" if library == "kiln" else "cupy.RawModule"
        print(f"| {name} | {statistics.median(cold):.1f} | {statistics.median(disk):.3f} | "
              f"{statistics.median(handle):.2f} | {statistics.median(content):.2f} |", flush=True)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child-first":
        child_first(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--child-program":
        child_program(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per first-call figure (median)")
    parser.add_argument("--sizes", default="24,28", help="log2 of the steady state's item counts")
    parser.add_argument("--reps", type=int, default=20, help="calls per timed batch in the steady state")
    parser.add_argument("--oneshot-sizes", default="20,24,26", help="log2 of the one-shot table's item counts")
    parser.add_argument("--calls", type=int, default=51, help="timed calls of each one-shot row (median)")
    parser.add_argument("--parts", default="first,temp,steady,launch,program,oneshot")
    args = parser.parse_args()
    parts = args.parts.split(",")
    import cupy

    import kiln

    device = kiln.primitives_registry().device()
    print(f"# kiln from Python: {device.name} (sm_{device.arch}), CuPy {cupy.__version__}, "
          f"Python {sys.version.split()[0]}")
    if "first" in parts:
        first_calls(args.runs)
    if "temp" in parts:
        temp_first_calls(args.runs)
    if "steady" in parts:
        steady([int(s) for s in args.sizes.split(",")], args.reps)
    if "launch" in parts:
        launch_overhead()
    if "program" in parts:
        programs(args.runs)
    if "oneshot" in parts:
        oneshot([int(s) for s in args.oneshot_sizes.split(",")], args.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
