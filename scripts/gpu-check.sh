#!/usr/bin/env bash
# One call on the GPU machine: build from scratch, run every suite, kiln info, the start-up benchmark,
# and the library sizes. Logs go to $OUT (the device tool brings them back) or ./gpu-check-out.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-check-out}"
mkdir -p "$out"
rm -rf build
start=$(date +%s%N)
scripts/setup.sh > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
echo "full build: $(( ($(date +%s%N) - start) / 1000000 )) ms"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
meson test -C build --print-errorlogs 2>&1 | tee "$out/test.log" | tail -12
grep -hE "consumer tests:|the program built" build/meson-logs/testlog.txt
for suite in cpu gpu; do
  echo "== $suite"; build/tests/test_$suite 2>&1 | tail -3
done
build/runtime/tools/kiln info 2>&1 | tee "$out/info.txt"
build/bench/bench_startup 11 2>&1 | tee "$out/bench_startup.md"
ls -l build/runtime/libkiln.so* build/generated/libkiln_examples.a | awk '{print $5, $9}'
build/bench/bench_jit_scaling 2>&1 | tee "$out/bench_jit_scaling.md"
