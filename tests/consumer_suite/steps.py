"""What the consumer suite's scripts share: run a command where a reader of the test log can follow it,
a scratch directory kept only when something failed, and a command run where the CUDA toolkit's headers
are hidden."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


# Host code at -O0 and without debug information, for the build of kiln as a subproject (consumer.py):
# what is tested is the build's wiring and the programs' results, and -O3 made the host compiles most of
# the suite's time on CI's 2-core machine. The subprojects as unity builds (Meson's unity=subprojects:
# a few of each library's sources compiled as one file), as a consumer may build them: libkiln's headers
# are then parsed once per few sources, which cut its compile to about a third; the consumer's own
# sources stay apart.
SUBPROJECT_OPTIONS = ["-Doptimization=0", "-Ddebug=false", "-Dunity=subprojects"]


def names_cache_options(args) -> list[str]:
    """kiln's option giving a subproject build the names cache of the build under test (its tables' lower
    step then runs NVRTC only for what that build did not name), or none where it keeps none."""
    return [f"-Dkiln:names_cache={args.names_cache}"]


def add_arguments(p) -> None:
    """The arguments tests/meson.build gives consumer.py and installed.py alike."""
    p.add_argument("--source", required=True, help="kiln's source tree")
    p.add_argument("--toolkit", required=True)
    p.add_argument("--meson", required=True)
    p.add_argument("--names-cache", default="none", help="the names cache of the build under test (none: none)")


class StepFailed(Exception):
    pass


def check_kiln_pc(prefix: Path, toolkit: str) -> None:
    """`pkg-config --cflags --libs kiln` of the install at `prefix` (its .pc files relative to where they
    lie) names kiln's and cuda.h's directories and libkiln, nothing of libkiln's own dependencies."""
    out: list[str] = []
    run(["pkg-config", "--cflags", "--libs", "kiln"], env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
    flags = sorted(f[:2] + os.path.normpath(f[2:]) if f[:2] in ("-I", "-L") else f for f in out[-1].split())
    if flags != sorted([f"-I{prefix}/include", f"-I{os.path.normpath(toolkit)}/include", f"-L{prefix}/lib", "-lkiln"]):
        raise StepFailed(f"pkg-config --cflags --libs kiln gives more than libkiln's own flags, or other places: "
                         f"{out[-1].strip()}")


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, ok=(0,), out: list | None = None) -> int:
    """Run `cmd`, echoing it and its output (appended to `out` when given); raise StepFailed unless its
    exit status is in `ok`."""
    print(f"$ {' '.join(map(str, cmd))}" + (f"    (in {cwd})" if cwd else ""), flush=True)
    start = time.monotonic()
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=None if env is None else {**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(result.stdout)
    if out is not None:
        out.append(result.stdout)
    print(f"  -> exit {result.returncode} in {time.monotonic() - start:.1f} s", flush=True)
    if result.returncode not in ok:
        raise StepFailed(f"{cmd[0]} exited {result.returncode}")
    return result.returncode


class Scratch:
    """A temporary directory, removed on success and kept (and named) on failure."""

    def __init__(self, prefix: str):
        self.path = Path(tempfile.mkdtemp(prefix=prefix))

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, kind, value, traceback):
        if kind is None:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            print(f"kept {self.path} for inspection", flush=True)
        return False


def main(body) -> int:
    """Run `body()`, turning StepFailed into exit 1 with its message."""
    try:
        return body()
    except StepFailed as e:
        print(f"FAILED: {e}", flush=True)
        return 1


def without_toolkit_headers(cmd: list, toolkit: str, scratch: Path) -> list | None:
    """`cmd` to run in a private mount namespace where the toolkit's include directory is empty: a machine
    where only the program is installed, as the JIT tier must work there. None where no such namespace
    can be made (not root): the caller says it skipped that part."""
    if subprocess.run(["unshare", "-m", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        return None
    empty = scratch / "empty-include"
    empty.mkdir(exist_ok=True)
    include = os.path.realpath(os.path.join(toolkit, "include"))
    return ["unshare", "-m", "bash", "-c", 'mount --bind "$0" "$1" && [ -z "$(ls -A "$1")" ] && exec "${@:2}"',
            str(empty), include, *map(str, cmd)]
