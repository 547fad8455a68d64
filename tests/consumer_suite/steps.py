"""What the consumer suite's scripts share: run a command where a reader of the test log can follow it,
and a scratch directory kept only when something failed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class StepFailed(Exception):
    pass


def run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, ok=(0,)) -> int:
    """Run `cmd`, echoing it and its output; raise StepFailed unless its exit status is in `ok`."""
    print(f"$ {' '.join(map(str, cmd))}" + (f"    (in {cwd})" if cwd else ""), flush=True)
    start = time.monotonic()
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=None if env is None else {**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(result.stdout)
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
