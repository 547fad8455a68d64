"""Operators given as CUDA C++ text from Python: one table, a row per family.

For each family, a new operator text (never seen by any cache) is called once in a fresh Python process with
an empty kiln cache (cold: the operator compiled and linked by the JIT tier), then in a second fresh process
with the same cache (the link read from disk), each to its result on the host, the import, the CUDA context
and the arrays excluded; then, in that second process, warm calls (the plan found in memory), host time of
one call and its synchronisation, median of --calls. CuPy's own run-time kernels of the same operation
(ReductionKernel for the reduce, ElementwiseKernel for the transform) are timed the same way beside them,
cold (an empty CUPY_CACHE_DIR) and warm (the same directory, a new process).

    PYTHONPATH=build/python python3 bench/python_operators.py [--n 2^20 as 20] [--calls 200]

Build kiln with the primitives' LTO-IR for this GPU (scripts/setup.sh does: -Dprimitive_archs=<this GPU's
arch>); without it the cold row also compiles CUB's kernels, not only the operator.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# (family, the call on x (float32, n items) with operator text `op`, a CuPy peer or None)
FAMILIES = {
    "reduce": ("kiln.reduce(x, op, -1e30)", "reduce"),
    "exclusive_scan": ("kiln.exclusive_scan(x, op, 0.0)", None),
    "inclusive_scan": ("kiln.inclusive_scan(x, op)", None),
    "transform": ("kiln.transform(x, unary)", "transform"),
    "transform_reduce": ("kiln.transform_reduce(x, unary, op, 0.0)", None),
    "select_if": ("kiln.select_if(x, predicate)[1]", None),
    "merge_sort_pairs": ("kiln.merge_sort_pairs(x, v, op=compare)[0]", None),
    "segmented_reduce": ("kiln.segmented_reduce(x, offsets, op=op, init=-1e30)", None),
    "unique_by_key": ("kiln.unique_by_key(x, v, op=compare.replace('>', '=='))[2]", None),
}

CHILD = r"""
import json, statistics, sys, time
import cupy
family, call, tag, peer = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[6]
n, calls = int(sys.argv[4]), int(sys.argv[5])
x = cupy.arange(n, dtype=cupy.float32) % 1000
v = cupy.arange(n, dtype=cupy.int32)
offsets = cupy.arange(0, n + 1, 1024, dtype=cupy.int32)
cupy.cuda.Device().synchronize()
# the operators: new text each run (tag), so no cache has seen it
op = f"a > b ? a : b /* {tag} */"
unary = f"x * T(2) /* {tag} */"
predicate = f"x > T(500) /* {tag} */"
compare = f"a > b /* {tag} */"
if peer == "reduce":
    kernel = cupy.ReductionKernel("T x", "T y", "x", f"a > b ? a : b /* {tag} */", "y = a", "-1e30", "peer_max")
    run = lambda: kernel(x)
elif peer == "transform":
    kernel = cupy.ElementwiseKernel("T x", "T y", f"y = x * 2 /* {tag} */", "peer_scale")
    run = lambda: kernel(x)
else:
    import kiln
    code = compile(call, "<call>", "eval")  # parsed once: a warm call times kiln, not the parser
    run = lambda: eval(code)
start = time.perf_counter()
out = run()
cupy.asnumpy(out)
first = time.perf_counter() - start
times = []
for _ in range(calls):
    start = time.perf_counter()
    run()
    cupy.cuda.get_current_stream().synchronize()
    times.append(time.perf_counter() - start)
print(json.dumps({"first_ms": first * 1e3, "warm_us": statistics.median(times) * 1e6}))
"""


def child(family, call, peer, n, calls, env, tag):
    done = subprocess.run([sys.executable, "-c", CHILD, family, call, tag, str(n), str(calls), peer or "-"],
                          env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{family} ({peer or 'kiln'}) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(family, call, peer, n, calls):
    """(cold first call ms, second process first call ms, warm us) with fresh caches."""
    with tempfile.TemporaryDirectory(prefix="kiln-bench-operators-") as cache:
        env = dict(os.environ, KILN_CACHE_DIR=os.path.join(cache, "kiln"), CUPY_CACHE_DIR=os.path.join(cache, "cupy"))
        tag = f"{family} {time.time_ns()}"
        cold = child(family, call, peer, n, calls, env, tag)
        again = child(family, call, peer, n, calls, env, tag)
    return cold["first_ms"], again["first_ms"], again["warm_us"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="log2 of the items (default 20)")
    parser.add_argument("--calls", type=int, default=200, help="warm calls timed (default 200)")
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    n = 1 << args.n
    print(f"operators from Python, float32, n = 2^{args.n}; first calls to the result on the host; warm: median "
          f"of {args.calls} calls, each synchronised")
    print(f"| {'family':<18} | {'who':<22} | {'cold first call ms':>18} | {'2nd process ms':>14} | {'warm us':>8} |")
    print(f"|{'-' * 20}|{'-' * 24}|{'-' * 20}:|{'-' * 16}:|{'-' * 10}:|")
    for family in args.families.split(","):
        call, peer = FAMILIES[family]
        who = [("kiln", None)] + ([(f"CuPy {'ReductionKernel' if peer == 'reduce' else 'ElementwiseKernel'}",
                                    peer)] if peer else [])
        for name, p in who:
            cold, again, warm = row(family, call, p, n, args.calls)
            print(f"| {family:<18} | {name:<22} | {cold:>18.1f} | {again:>14.2f} | {warm:>8.1f} |", flush=True)


if __name__ == "__main__":
    main()
