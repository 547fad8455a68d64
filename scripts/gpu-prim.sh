#!/usr/bin/env bash
# The primitives on a machine with a GPU, in one run: an sm_90 build (embedded tier) runs the prim tests and
# bench_prim; an sm_80-only build (this GPU's arch left out, so every kernel comes from the JIT tier) runs
# the prim tests again with an empty cache, then once more (disk tier).
#   scripts/gpu-prim.sh [test-filter] [bench args…]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-prim-out}"
mkdir -p "$out"
filter="${1:-*}"; shift || true
jobs=$(nproc)
export PATH=/usr/local/cuda/bin:$PATH
build() {  # dir archs
  [ -d "$1" ] || meson setup "$1" -Darchs="$2" -Dembed_ptx=false -Dtests=true -Dbench=true > "$out/setup-$1.log" 2>&1 \
    || { tail -30 "$out/setup-$1.log"; return 1; }
  local t=$(date +%s)
  ninja -C "$1" -j "$jobs" tests/test_prim bench/bench_prim runtime/kiln-jitd runtime/tools/kiln > "$out/build-$1.log" 2>&1 || { grep -E "error|FAILED" -A5 "$out/build-$1.log" | head -60; return 1; }
  echo "built $1 in $(( $(date +%s) - t )) s"
}
build build-sm90 sm_90 || exit 1
build build-sm80 sm_80 &
bpid=$!
export KILN_CACHE_DIR="$PWD/.prim-cache"
rm -rf "$KILN_CACHE_DIR"
echo "== prim tests, embedded (sm_90 build)"
build-sm90/tests/test_prim -tc="$filter" 2>&1 | tail -25 | tee "$out/test-embedded.log"
echo "== bench_prim"
build-sm90/bench/bench_prim "$@" 2>&1 | tee "$out/bench_prim.md"
wait $bpid || exit 1
echo "== prim tests, JIT (sm_80 build, empty cache)"
rm -rf "$KILN_CACHE_DIR"
t=$(date +%s%N)
build-sm80/tests/test_prim -tc="$filter" 2>&1 | tail -25 | tee "$out/test-jit.log"
echo "JIT run: $(( ($(date +%s%N) - t) / 1000000 )) ms"
echo "== prim tests, disk (sm_80 build, warm cache)"
build-sm80/tests/test_prim -tc="$filter" 2>&1 | tail -5
