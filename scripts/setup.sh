#!/usr/bin/env bash
# Installs what a Debian 12 machine with the CUDA toolkit lacks for kiln (only what is missing),
# then configures (once) and builds kiln in ./build. Later runs rebuild only what changed.
# scripts/setup.sh --check: only says which Debian packages are missing (exit 1 when some are).
set -euo pipefail
cd "$(dirname "$0")/.."
check_only=false
case "${1:-}" in
  --check) check_only=true ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--check]" >&2; exit 2 ;;
esac

missing=()
command -v meson >/dev/null || missing+=(meson)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v c++ >/dev/null || missing+=(g++)
command -v pkg-config >/dev/null || missing+=(pkg-config)
command -v cmake >/dev/null || missing+=(cmake)                        # the installed package's CMake consumer test
# Jinja2, for kiln-gen, in each interpreter Meson may run it with: Debian's python3 (what runs pip and
# meson-python in docs/python.md's install, directly or through a venv made from it: its modules are
# Debian's packages, asked of dpkg) and the python3 on PATH (what `meson setup` below finds).
dpkg -s python3-jinja2 >/dev/null 2>&1 || missing+=(python3-jinja2)
path_python=$(command -v python3 || true)
path_python_lacks_jinja2=false  # and is not Debian's, which python3-jinja2 serves
case "$(readlink -f "$path_python" 2>/dev/null)" in
  /usr/bin/python3*) ;;
  *) [ -n "$path_python" ] && ! "$path_python" -c 'import jinja2' 2>/dev/null && path_python_lacks_jinja2=true ;;
esac
[ -f /usr/include/doctest/doctest.h ] || [ -f /usr/local/include/doctest/doctest.h ] || missing+=(doctest-dev)
pkg-config --exists libzstd 2>/dev/null || missing+=(libzstd-dev)      # the disk cache's compression
pkg-config --exists libcrypto 2>/dev/null || missing+=(libssl-dev)     # the disk cache's SHA-256
pkg-config --exists hiredis 2>/dev/null || missing+=(libhiredis-dev)   # the remote tier's Redis client
command -v redis-server >/dev/null || [ -x /usr/bin/redis-server ] || missing+=(redis-server)  # the remote tier's tests
pkg-config --exists libcurl 2>/dev/null || missing+=(libcurl4-openssl-dev)  # the remote tier's HTTP(S) and S3 client
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing+=(nginx)  # the HTTP store's tests (WebDAV PUT)
command -v openssl >/dev/null || missing+=(openssl)                    # the HTTP store's tests make a certificate
# The Python package (python/): pybind11 and Python's headers build it, meson-python installs it with
# Debian's pip (in a venv: python3-venv), pytest and NumPy run its tests. pytest and NumPy are asked of
# dpkg too: the python3 on PATH may be another interpreter, which the tests use when it has them.
have() { python3 -c "import $1" 2>/dev/null || dpkg -s "$2" >/dev/null 2>&1; }
[ -f /usr/include/pybind11/pybind11.h ] || missing+=(pybind11-dev)
dpkg -s python3-dev >/dev/null 2>&1 || [ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)/Python.h" ] || missing+=(python3-dev)
for deb in python3-mesonpy python3-pip python3-venv; do
  dpkg -s $deb >/dev/null 2>&1 || missing+=($deb)
done
have pytest python3-pytest || missing+=(python3-pytest)
have numpy python3-numpy || missing+=(python3-numpy)

# No package gives Jinja2 to an interpreter that is not Debian's (pyenv, a venv without system packages).
lacks_jinja2="kiln setup: $path_python, the python3 on PATH, has no Jinja2: Meson runs kiln's generator with"
lacks_jinja2+=" it. Install Jinja2 into it, or put /usr/bin first on PATH (with python3-jinja2)"
if $check_only; then
  $path_python_lacks_jinja2 && echo "$lacks_jinja2"
  [ ${#missing[@]} -eq 0 ] && ! $path_python_lacks_jinja2 && { echo "kiln setup: nothing missing"; exit 0; }
  [ ${#missing[@]} -gt 0 ] && echo "kiln setup: missing ${missing[*]}"
  exit 1
fi
$path_python_lacks_jinja2 && { echo "$lacks_jinja2" >&2; exit 1; }
if [ ${#missing[@]} -gt 0 ]; then
  echo "kiln setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "kiln setup: run as root, or install: ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm's s3rver, a third-party S3 server for the S3 store's tests (tests/cpu/http_servers.hpp); where npm
# is, as root. Without it that one case is skipped, the S3 protocol still tested on object_server.py.
if ! command -v s3rver >/dev/null && command -v npm >/dev/null && [ "$(id -u)" -eq 0 ]; then
  npm install -g --no-audit --no-fund --loglevel=error s3rver@3.7.1 >/dev/null ||
    echo "kiln setup: npm could not install s3rver; its test case will be skipped" >&2
fi

[ -x "${KILN_TOOLKIT:-/usr/local/cuda}/bin/nvcc" ] || {
  echo "kiln setup: no CUDA toolkit at ${KILN_TOOLKIT:-/usr/local/cuda}: install CUDA 13 or set KILN_TOOLKIT" >&2
  exit 1
}

# Meson finds nvcc, the compiler of libkiln_prim's host code, on PATH.
export PATH="${KILN_TOOLKIT:-/usr/local/cuda}/bin:$PATH"

# kiln's own primitives (27 CUB units) are embedded for this machine's GPU only, or, without one, not at
# all (the JIT tier serves them): the first build on a 2-core box takes minutes, not half an hour.
# Consumers' builds keep the common architectures (meson_options.txt); -Dprimitive_archs changes this.
# The suite sanitized (test_cpu, the remote, soak and fleet tests: tests/meson.build) is built and run by
# scripts/sanitize.sh under the sanitizers, the README's test command's last step: not built here, where
# it would only be compiled (a third of the tests' compile time).
# The benchmarks need a GPU to run: without one they are not built (a third of the first build's
# compile time there; scripts/gpu-check.sh builds them where there is one). -Dbench=true builds them.
# A unity build (Meson's unity=on: a few C++ sources of a target compiled as one file, so that kiln's,
# the standard library's and doctest's headers are parsed once per few files), as the sanitizer builds
# are; the primitives' .cu files never (primitives/meson.build). A build configured by hand without it
# compiles each file alone, which is what checks that each includes what it uses.
if [ ! -f build/build.ninja ]; then
  prim_archs=$(scripts/local-gpu-arch.sh)
  bench=auto benchmarks=built
  [ "$prim_archs" = none ] && bench=false benchmarks="not built (no GPU)"
  echo "kiln setup: the primitives' kernels embedded for: $prim_archs; benchmarks: $benchmarks"
  meson setup build -Dtoolkit="${KILN_TOOLKIT:-/usr/local/cuda}" -Dprimitive_archs="$prim_archs" -Dbench=$bench \
    -Dsanitized_suite=false -Dunity=on
fi
meson compile -C build
