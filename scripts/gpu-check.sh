#!/usr/bin/env bash
# kiln's checks on a machine with a GPU, in parts that each take a few minutes:
#  suites: build from scratch with the README's command, run every suite, kiln info, library sizes;
#  sm90:   the sm_90-only build that bench uses, built whole, and its codegen, cpu and gpu suites (the
#          README build's suites without the consumer builds, in half the time);
#  bench:  from an sm_90-only build (the same cubins for this GPU, built in a minute or two): the
#          start-up, JIT scaling and primitives (against cub::Device*) benchmarks (BENCHES="prim" or
#          "startup jit_scaling": some of them, to keep each run under ten minutes);
#  jit:    a build whose arch list leaves out this GPU's (sm_80 only, no PTX): every primitive
#          JIT-compiled at once, against the unit it ended with alone (T), then the gpu suite on
#          JIT-built kernels;
#  ptx:    the same build with PTX (compute_80) embedded: every primitive assembled from PTX at once,
#          then the gpu suite on PTX-tier kernels;
#  suite:  the benchmark suite (bench/suite.py: tiers against CuPy, the 200-unit registry, JIT scaling,
#          start-up) from an sm_90 build with the big registry, its tables and results.csv;
#  tiers:  the suite's first part only (kiln's tiers, a cold JIT get step by step, CuPy on the same sources).
# scripts/gpu-check.sh [suites|sm90|bench|jit|ptx|suite|tiers|all]
# Logs go to $OUT, else ./gpu-check-out.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH  # nvcc, for Meson's CUDA language (libkiln_prim)
# nvJitLink keeps ptxas's output in the driver's JIT cache (~/.nv/ComputeCache) and reads it back in later
# processes: off, so that every cold compile measured or tested here compiles (docs/DESIGN.md, "The
# driver's JIT cache").
export CUDA_CACHE_DISABLE=1
out="${OUT:-gpu-check-out}"
mkdir -p "$out"
part="${1:-all}"
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }

# A machine without apt installs Debian's packages first, from .deb files: scripts/unpack-debs.sh DIR
# (tests/README.md). This script only says so.
if ! pkg-config --exists hiredis libcurl 2>/dev/null; then
  echo "gpu-check.sh: hiredis or libcurl is not installed; without apt, run scripts/unpack-debs.sh DIR with" \
       "the .deb files of libhiredis-dev, libhiredis0.14, libcurl4-openssl-dev and redis-server first" >&2
fi

if want suites; then
rm -rf build
start=$(date +%s%N)
scripts/setup.sh > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "full build: $(( ($(date +%s%N) - start) / 1000000 )) ms"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
meson test -C build --print-errorlogs 2>&1 | tee "$out/test.log" | tail -12
grep -hE "consumer tests:|the program built" build/meson-logs/testlog.txt
# Each doctest program's case and assertion counts, from the log of the run above.
grep -E "^test:|^\[doctest\] (test cases|assertions)" build/meson-logs/testlog.txt | grep -B1 "test cases" | grep -v "^--"
build/runtime/tools/kiln info 2>&1 | tee "$out/info.txt"
ls -l build/runtime/libkiln.so* build/primitives/libkiln_prim.so build/generated/libkiln_examples.a | awk '{print $5, $9}'
# The embedded fatbins: their sizes as kiln list says, and what CUDA's cuobjdump lists in libkiln_prim.
build/runtime/tools/kiln list | grep "^registry"
for list in --list-elf --list-ptx; do
  cuobjdump $list build/primitives/libkiln_prim.so > "$out/cuobjdump$list.txt" 2>&1
  echo "cuobjdump $list libkiln_prim.so: $(wc -l < "$out/cuobjdump$list.txt") lines"; head -4 "$out/cuobjdump$list.txt"
done
grep -hE "^(libkiln_prim|kiln)\.?[a-z]* --list" build/meson-logs/testlog.txt
fi

if want sm90; then
start=$(date +%s%N)
[ -d build-sm90 ] || meson setup build-sm90 -Darchs=sm_90 -Dembed_ptx=false > "$out/build-sm90.log" 2>&1
ninja -C build-sm90 >> "$out/build-sm90.log" 2>&1 || { tail -40 "$out/build-sm90.log"; exit 1; }
echo "sm_90 build: $(( ($(date +%s%N) - start) / 1000000 )) ms"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
meson test -C build-sm90 --suite codegen --suite cpu --suite gpu --no-rebuild --print-errorlogs 2>&1 |
  tee "$out/test-sm90.log" | grep -E "^ *[0-9]+/[0-9]+ |^Ok|^Fail|ERROR:|values:"
grep -E "^test:|^\[doctest\] (test cases|assertions)" build-sm90/meson-logs/testlog.txt | grep -B1 "test cases" | grep -v "^--"
grep -hE "MESSAGE|kills|forked worker" build-sm90/meson-logs/testlog.txt | head -20
fi

# A one-thread loop alone, then one per core at once: how much slower a core runs when every core is busy
# (1.12-2.18x on a 16-core H200 host: docs/facts.md, "Scheduling a table"), which bounds a table of as
# many long units as cores against its slowest unit alone (docs/DESIGN.md, "Scheduling a table").
core_speed_under_load() {
  local loop='import time
t = time.perf_counter(); s = 0
for i in range(20_000_000): s += i
print(f"{(time.perf_counter() - t) * 1000:.0f}")'
  local dir n
  dir="$(mktemp -d)" n="$(nproc)"
  echo "one core alone: $(python3 -c "$loop") ms"
  for i in $(seq "$n"); do python3 -c "$loop" > "$dir/$i" & done
  wait
  echo "$n at once, each: $(sort -n "$dir"/* | tr '\n' ' ')ms"
  rm -rf "$dir"
}

if want bench; then
# BENCHES picks some: the three together take over seven minutes on an H200 host (most of it bench_prim's
# latency tables, after its throughput table), so "prim" may run alone and the others in another run.
# Only the picked ones are built (bench_prim's CUDA sources take most of the build).
benches="${BENCHES:-startup jit_scaling prim}"
for bench in $benches; do
  case "$bench" in
    startup|jit_scaling|prim) ;;
    *) echo "gpu-check.sh: BENCHES names $bench; it may name startup, jit_scaling, prim" >&2; exit 2 ;;
  esac
done
[ -d build-sm90 ] || meson setup build-sm90 -Darchs=sm_90 -Dembed_ptx=false > "$out/build-sm90.log" 2>&1
ninja -C build-sm90 runtime/kiln-jitd $(for b in $benches; do echo "bench/bench_$b"; done) \
  >> "$out/build-sm90.log" 2>&1 || { tail -40 "$out/build-sm90.log"; exit 1; }
for bench in $benches; do
  case "$bench" in
    startup) build-sm90/bench/bench_startup 11 2>&1 | tee "$out/bench_startup.md" ;;
    jit_scaling) core_speed_under_load | tee "$out/core_speed.txt"
                 build-sm90/bench/bench_jit_scaling 2>&1 | tee "$out/bench_jit_scaling.md" ;;
    prim) build-sm90/bench/bench_prim 2>&1 | tee "$out/bench_prim.md" ;;
  esac
done
fi

if want jit; then
echo "== gpu suite, build without this GPU's arch (-Darchs=sm_80): JIT tier, empty cache"
export KILN_CACHE_DIR="$PWD/.jit-check-cache"
rm -rf build-jit "$KILN_CACHE_DIR"
meson setup build-jit -Darchs=sm_80 -Dembed_ptx=false > "$out/build-jit.log" 2>&1 &&
  ninja -C build-jit >> "$out/build-jit.log" 2>&1 || { tail -40 "$out/build-jit.log"; exit 1; }
# One process JIT-compiles every primitive at once (and prints how long that took), then the suite runs
# in parallel on what it published: these processes load the JIT-built cubins from disk.
# The machine's CPU time meanwhile (/proc/stat: every process, the compile workers included), over its
# cores: the least wall time any schedule of this work could take here. The pool's trace comes back.
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
b0=$(busy)
KILN_JIT_TRACE="$out/jit-trace.jsonl" build-jit/tests/test_prim -tc=none-just-warm-up 2>&1 | grep -E "^primitives:|warning"
b1=$(busy)
awk -v b="$((b1 - b0))" -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" \
  'BEGIN{printf "the machine'"'"'s CPU time during it: %.1f s; over %d cores: %.2f s at the least\n", b/hz, n, b/hz/n}'
# The other bound: the unit the table ended with (the trace's last), alone in a new process (T), against
# the whole table by the same command, alternating, each into an empty cache; `kiln precompile` for this
# GPU's arch, the whole command timed (process, pool and workers started).
kiln=build-jit/runtime/tools/kiln
last_unit=$(python3 -c 'import json, sys
done = [json.loads(l) for l in open(sys.argv[1]) if "\"request\"" in l]
print(max(done, key=lambda r: r["end"])["unit"] if done else "")' "$out/jit-trace.jsonl" 2>/dev/null)
last_kernel=$("$kiln" list --json | python3 -c 'import json, sys
registry, _, unit = sys.argv[1].partition("/")
units = {u["name"]: u for r in json.load(sys.stdin)["registries"] if r["name"] == registry for u in r["units"]}
print(units[unit]["kernels"][0]["name"] if unit in units else "")' "$last_unit")
gpu_arch=$(scripts/local-gpu-arch.sh)
# Prints the milliseconds of one `kiln precompile` into an empty cache, or "failed" (its error on stderr).
timed_precompile() {
  local dir start
  dir=$(mktemp -d) start=$(date +%s%N)
  if KILN_CACHE_DIR="$dir" "$kiln" precompile --arch "$gpu_arch" "$@" > /dev/null; then
    echo $(( ($(date +%s%N) - start) / 1000000 ))
  else
    echo failed
  fi
  rm -rf "$dir"
}
if [ -z "$last_kernel" ]; then
  echo "gpu-check.sh: no T row: the trace $out/jit-trace.jsonl names no request whose unit kiln list knows"
else
  whole=() alone=()
  for round in 1 2 3; do
    whole+=("$(timed_precompile)") alone+=("$(timed_precompile "$last_kernel")")
  done
  echo "kiln precompile --arch $gpu_arch, 3 rounds alternating: every unit ${whole[*]} ms; the unit it ended" \
    "with ($last_unit, kernel $last_kernel) alone, T: ${alone[*]} ms"
fi
meson test -C build-jit --suite gpu --no-rebuild --print-errorlogs 2>&1 | grep -E "^ *[0-9]+/|^Ok|^Fail" | tee "$out/test-jit.log"
unset KILN_CACHE_DIR
fi

if want ptx; then
echo "== gpu suite, build without this GPU's arch but with its PTX (-Darchs=sm_80 -Dembed_ptx=true): PTX tier"
export KILN_CACHE_DIR="$PWD/.ptx-check-cache"
rm -rf build-ptx "$KILN_CACHE_DIR"
meson setup build-ptx -Darchs=sm_80 -Dembed_ptx=true > "$out/build-ptx.log" 2>&1 &&
  ninja -C build-ptx >> "$out/build-ptx.log" 2>&1 || { tail -40 "$out/build-ptx.log"; exit 1; }
build-ptx/tests/test_prim -tc=none-just-warm-up 2>&1 | grep -E "^primitives:|warning"
meson test -C build-ptx --suite gpu --no-rebuild --print-errorlogs 2>&1 | grep -E "^ *[0-9]+/|^Ok|^Fail" | tee "$out/test-ptx.log"
unset KILN_CACHE_DIR
fi

if want suite || [ "$part" = tiers ]; then
start=$(date +%s%N)
[ -d build-bench ] || meson setup build-bench -Darchs=sm_90 -Dembed_ptx=true -Dprimitives=false -Dtests=false \
  -Dbig_registry=true > "$out/build-bench.log" 2>&1
ninja -C build-bench >> "$out/build-bench.log" 2>&1 || { tail -40 "$out/build-bench.log"; exit 1; }
echo "bench build (200-unit registry, sm_90): $(( ($(date +%s%N) - start) / 1000000 )) ms"
parts="${SUITE_PARTS:-tiers,big,scaling,startup}"  # SUITE_PARTS picks some (a few minutes each)
[ "$part" = tiers ] && parts=tiers
python3 bench/suite.py build-bench --out "$out/suite" --parts "$parts" 2>&1 | tee "$out/suite.md"
fi
