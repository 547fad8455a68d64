#!/usr/bin/env bash
# The JIT tier on a machine without the CUDA toolkit's headers or compiler libraries, simulated with a
# private mount namespace (needs root; skipped with 77 otherwise):
#  1. headers hidden: kiln precompile compiles every example unit from the bundled headers alone;
#  2. NVRTC and nvJitLink hidden: kiln still runs (its kernels are embedded), and the JIT says what to install.
set -u
kiln="$1"
toolkit="$2"
unshare -m true 2>/dev/null || { echo "skipped: no private mount namespace here (not root?)"; exit 77; }
include=$(realpath "$toolkit/include")
libs=$(realpath "$toolkit/lib64")
empty=$(mktemp -d)
cache=$(mktemp -d)
trap 'rm -rf "$empty" "$cache"' EXIT

# Every unit of every registry the CLI carries (the examples, and the primitives when built), but the
# linked ones: they are built with an operator, at run time, and precompile passes them by.
units=$("$kiln" list | grep '^  unit ' | grep -vc 'linked: built at run time')
out=$(unshare -m bash -c "mount --bind '$empty' '$include' && ls -A '$include' | wc -l && \
  KILN_CACHE_DIR='$cache/headers-hidden' '$kiln' precompile --arch sm_86" 2>&1)
echo "$out"
[ "$(echo "$out" | head -1)" = 0 ] || { echo "FAIL: the toolkit's include directory was not hidden"; exit 1; }
[ "$(echo "$out" | grep -c '^compiled ')" = "$units" ] || { echo "FAIL: expected $units units compiled from the bundle"; exit 1; }

out=$(unshare -m bash -c "mount --bind '$empty' '$libs' && '$kiln' list >/dev/null && echo listed && \
  KILN_CACHE_DIR='$cache/libs-hidden' '$kiln' precompile --arch sm_86" 2>&1)
status=$?
echo "$out"
echo "$out" | grep -q '^listed$' || { echo "FAIL: kiln did not run without NVRTC and nvJitLink"; exit 1; }
[ $status -ne 0 ] || { echo "FAIL: precompile succeeded without NVRTC"; exit 1; }
echo "$out" | grep -q 'libnvrtc' || { echo "FAIL: the error does not say which library is missing"; exit 1; }
echo "ok"
