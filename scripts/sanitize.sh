#!/usr/bin/env bash
# The sanitizer runs; any finding fails. Each has a build of its own, without the primitives and
# benchmarks (their host code is nvcc's, their tests need a GPU) and for one architecture, to stay
# within CI's time:
#  build-sanitize/  AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): the suite sanitized
#                   (tests/meson.build: the tests of the programs this build instruments, the soak and
#                   the codegen tests that run kiln-ptx-strip among them; the others run Python, nvcc and
#                   NVRTC alone, or need the primitives, and run in build/ only) but its concurrency
#                   tests, which run under ThreadSanitizer below: each test once;
#  build-tsan/      ThreadSanitizer: the concurrency tests (test_cpu's suite "concurrency": the JIT pool,
#                   single-flight, processes and threads sharing a cache; test_cpu_concurrency, the files
#                   that hold them, so that only those are compiled) and a shorter soak. Their JIT
#                   workers are build/'s, uninstrumented (scripts/setup.sh builds them): a worker is one
#                   thread over NVRTC, which TSan cannot see into, so what TSan checks is the host side.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${KILN_TOOLKIT:-/usr/local/cuda}/bin:$PATH"
# At -O1, as the sanitizers' own documentation advises: the release default's -O3 doubled their compile
# (test_jit_pool.cpp under ASan+UBSan: 102 s at -O3, 51 s at -O1 on the 2-core box), the larger part of
# CI's time. NDEBUG as in the release build, so that the same code is checked. No Python package: an
# instrumented extension module cannot load into an uninstrumented interpreter.
# Unity builds (Meson's unity=on: a few sources of a target compiled as one file): kiln's headers and the
# standard library's and doctest's are parsed once per few sources, which cut libkiln's compile to about a
# third on the 2-core box, and the test programs' too; these builds are made from scratch on CI and seldom
# edited in.
common=(-Dtoolkit="${KILN_TOOLKIT:-/usr/local/cuda}" -Db_lundef=false -Dprimitives=false -Dbench=false
        -Darchs=sm_80 -Dembed_ptx=false -Doptimization=1 -Db_ndebug=true -Dpython=false -Dunity=on)

[ -x build/runtime/kiln-jitd ] && [ -x build/tests/fake-jitd ] ||
  { echo "scripts/sanitize.sh: no build/runtime/kiln-jitd or build/tests/fake-jitd: run scripts/setup.sh first" >&2; exit 1; }
[ -f build-sanitize/build.ninja ] ||
  meson setup build-sanitize "${common[@]}" -Db_sanitize=address,undefined -Dcpp_args=-fno-sanitize-recover=all
[ -f build-tsan/build.ninja ] || meson setup build-tsan "${common[@]}" -Db_sanitize=thread -Dcli=false

# The ThreadSanitizer build and tests run beside the ASan+UBSan build and its tests: the build at the lowest
# priority, on the cores the other leaves idle, and its tests as soon as it is done (both runs wait on
# workers, servers and each other: a quarter to a half of the two cores of CI's machine went unused while
# either ran alone). Their output goes to a log, shown after the ASan+UBSan run; they are stopped if this
# script ends first. One case checks that libkiln finds the kiln-jitd built beside it, so that one is built
# here too (the others use build/'s, as the header says).
tsan_log=build-tsan/sanitize.log
tsan() {
  # Its own environment only: the ASan+UBSan tests use their build's workers.
  export KILN_JITD="$PWD/build/runtime/kiln-jitd" KILN_TEST_JITD="$PWD/build/runtime/kiln-jitd" \
         KILN_TEST_FAKE_JITD="$PWD/build/tests/fake-jitd"
  echo "== ThreadSanitizer: the build"
  nice -n 19 ninja -C build-tsan tests/test_cpu_concurrency tests/cache_soak tests/fake-jitd runtime/kiln-jitd \
    > build-tsan/ninja.log 2>&1 || { tail -n 60 build-tsan/ninja.log; return 1; }
  tail -n 1 build-tsan/ninja.log
  export TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1
  echo "== ThreadSanitizer: the concurrency tests"
  build-tsan/tests/test_cpu_concurrency -ts=concurrency
  echo "== ThreadSanitizer: the soak"
  build-tsan/tests/cache_soak --seconds 10 --processes 3 --threads 3
}
# A process group of its own (job control on for this one start), so that stopping it stops what it runs.
set -m
tsan > "$tsan_log" 2>&1 &
tsan_run=$!
set +m
trap 'kill -- "-$tsan_run" 2>/dev/null || true' EXIT

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:print_summary=1
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1
# No `meson compile` first: meson test builds what the tests it runs need (each one's executable, the
# targets among its arguments and its depends:), and nothing of the gpu suite's.
meson test -C build-sanitize --suite sanitized --no-suite concurrency --print-errorlogs

tsan_status=0
wait "$tsan_run" || tsan_status=$?
trap - EXIT
cat "$tsan_log"
[ "$tsan_status" = 0 ] || { echo "scripts/sanitize.sh: the ThreadSanitizer run failed ($tsan_log)" >&2; exit 1; }
