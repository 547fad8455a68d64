#!/usr/bin/env bash
# docs/python.md's install, run as written in a new home (its venv, its kiln cache, no compiler cache) with
# Debian's PATH, each build timed: the default install (this machine's GPUs), then a wheel for sm_80 and
# sm_90 installed into a second venv with no source tree and no compiler on PATH, where libkiln must find
# the wheel's kiln-jitd. A whole build each (minutes on 2 cores), so not part of the suites.
#   scripts/python-install-check.sh [--primitives]    (--primitives: also the install with the primitives)
# Logs go to $OUT, else ./python-install-out.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${OUT:-python-install-out}")
mkdir -p "$out"
with_primitives=false
[ "${1:-}" = --primitives ] && with_primitives=true
tracked_before=$(git status --porcelain --untracked-files=no)

HOME=$(mktemp -d)
export HOME CCACHE_DISABLE=1 PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
unset VIRTUAL_ENV PYTHONPATH PYTHONHOME
trap 'rm -rf "$HOME"' EXIT
TIMEFORMAT="%R s wall, %U s user + %S s sys CPU"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

step() {  # step NAME FUNCTION: runs it, its output in $out/NAME.log, and says how long it took
  local name=$1 took
  { time "$2" > "$out/$name.log" 2>&1; } 2> "$out/$name.time" || { tail -30 "$out/$name.log"; echo "$name failed" >&2; exit 1; }
  echo "$name: $(tail -1 "$out/$name.time"); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# docs/python.md, "Install" (tests/consumer_suite/readme_lines.py holds the two the same).
install_default() {
/usr/bin/python3 -m venv --system-site-packages ~/kiln-venv
. ~/kiln-venv/bin/activate
pip install --no-build-isolation .
}
install_primitives() {
pip install --no-build-isolation --config-settings=setup-args="-Darchs=sm_90 -Dprimitives=true" .
}
make_wheel() {
pip wheel --no-build-isolation --no-deps --wheel-dir ~/wheels --config-settings=setup-args=-Darchs=sm_80,sm_90 .
}

# What `python -m kiln info` says the examples embed, and whether a compile found kiln-jitd: PYTHON DIR
check_package() {
  (cd / && "$1" - "$2" <<'PY'
import subprocess, sys, warnings
from pathlib import Path
import kiln
package = Path(kiln.__file__).parent
assert package.is_relative_to(sys.argv[1]), f"kiln imported from {package}, not from {sys.argv[1]}"
jitd = package / "kiln-jitd"
assert jitd.is_file() and jitd.stat().st_mode & 0o111, f"{jitd}: no executable kiln-jitd"
info = subprocess.run([sys.executable, "-m", "kiln", "info"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
print(next(line for line in info.splitlines() if line.strip().startswith("vector_add")))
compiled = subprocess.run([sys.executable, "-c", "import kiln; kiln.program(%r, name_expressions=['k'], label='install-check').precompile(80)"
                           % "__global__ void k(int* p) { *p = 2; }"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
assert compiled.returncode == 0, compiled.stdout
assert "JIT units in this process" not in compiled.stdout, compiled.stdout  # libkiln found no kiln-jitd
print(f"{package}: kiln-jitd found and used for a compile")
PY
  )
}

step install install_default
. ~/kiln-venv/bin/activate
check_package ~/kiln-venv/bin/python ~/kiln-venv
if $with_primitives; then
  step install-primitives install_primitives
  check_package ~/kiln-venv/bin/python ~/kiln-venv
fi
step wheel make_wheel
deactivate
wheel=$(ls ~/wheels/kiln-*.whl)
echo "$(basename "$wheel"): $(stat -c %s "$wheel") bytes"
python3 - "$wheel" <<'PY'
import sys, zipfile
names = {i.filename: i for i in zipfile.ZipFile(sys.argv[1]).infolist()}
package = sorted(n for n in names if not n.startswith("kiln-0.1.0.dist-info/"))
print("wheel:", ", ".join(package))
# the extension module and kiln-jitd at its root (platlib), the .py files as purelib data: one folder installed
assert all(n.startswith(("kiln/", "kiln-0.1.0.data/purelib/kiln/")) for n in package), package
assert (names["kiln/kiln-jitd"].external_attr >> 16) & 0o111, "kiln-jitd is not executable in the wheel"
assert any(n.startswith("kiln/_kiln.") and n.endswith(".so") for n in package), package
PY
# Elsewhere: a second venv, installed from the wheel alone with no compiler, nvcc or source tree reachable.
mkdir -p ~/empty && cd ~/empty
/usr/bin/python3 -m venv --system-site-packages ~/elsewhere
env -i HOME="$HOME" PATH="$HOME/empty" ~/elsewhere/bin/python -m pip install --no-index --no-deps "$wheel" > "$out/wheel-install.log" 2>&1 ||
  { cat "$out/wheel-install.log"; exit 1; }
check_package ~/elsewhere/bin/python ~/elsewhere
cd - > /dev/null

[ "$(git status --porcelain --untracked-files=no)" = "$tracked_before" ] || { git status --short; echo "tracked files changed" >&2; exit 1; }
echo "tracked files unchanged"
