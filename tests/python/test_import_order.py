"""kiln imported beside the array libraries, in either order, in a fresh interpreter each time.

The extension module once exported thousands of symbols (libkiln's, template instances, GNU-unique ones
among them), and importing kiln before ml_dtypes, CuPy or PyTorch crashed the interpreter inside their
code. Each library that is installed here is tried; one that is not is skipped, by name."""

import importlib.util
import os
import subprocess
import sys

import pytest

LIBRARIES = ["numpy", "ml_dtypes", "cupy", "torch"]


def _run(code: str) -> subprocess.CompletedProcess:
    # The child imports the package under test, as this process does (PYTHONPATH from the suite).
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("kiln_first", [True, False], ids=["kiln_first", "kiln_second"])
def test_import_beside(library, kiln_first):
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed for {sys.executable}")
    order = ["kiln", library] if kiln_first else [library, "kiln"]
    # Touch each library once after both are in, so that lazily bound code runs too.
    code = f"import {order[0]}; import {order[1]}; import kiln; kiln.Error; print('ok')"
    if library == "ml_dtypes":
        code += "; import ml_dtypes; ml_dtypes.finfo(ml_dtypes.float4_e2m1fn) if hasattr(ml_dtypes, 'float4_e2m1fn') else None"
    out = _run(code)
    assert out.returncode == 0, f"import {' then '.join(order)}: exit {out.returncode}\n{out.stderr[-3000:]}"
    assert "ok" in out.stdout
