"""Runs kiln-gen's command line inside the test process: its exit code and what it printed, as a build
would see them."""

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "codegen"))
import kiln_gen  # noqa: E402


def run_kiln_gen(*argv) -> tuple[int, str, str]:
    """kiln_gen.main(argv) (paths may be given as Path); returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = kiln_gen.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()
