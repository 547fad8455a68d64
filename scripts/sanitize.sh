#!/usr/bin/env bash
# The cpu and codegen suites under AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): any
# finding fails. A build of its own in build-sanitize/, without the primitives and benchmarks (their host
# code is nvcc's, their tests need a GPU) and for one architecture, to stay within CI's time.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${KILN_TOOLKIT:-/usr/local/cuda}/bin:$PATH"
[ -f build-sanitize/build.ninja ] || meson setup build-sanitize -Dtoolkit="${KILN_TOOLKIT:-/usr/local/cuda}" \
  -Db_sanitize=address,undefined -Db_lundef=false -Dcpp_args=-fno-sanitize-recover=all \
  -Dprimitives=false -Dbench=false -Darchs=sm_80 -Dembed_ptx=false
meson compile -C build-sanitize
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1
meson test -C build-sanitize --suite cpu --suite codegen --print-errorlogs
