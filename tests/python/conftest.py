"""Shared by the Python tests: a private disk cache, and the GPU fixtures (skipped without a GPU)."""

import atexit
import os
import shutil
import tempfile

import pytest

# libkiln reads KILN_CACHE_DIR once per process, on the cache's first use: set before kiln is imported, so
# no test writes into the user's cache.
_cache = tempfile.mkdtemp(prefix="kiln-python-test-")
atexit.register(shutil.rmtree, _cache, ignore_errors=True)
os.environ["KILN_CACHE_DIR"] = _cache

import kiln  # noqa: E402


@pytest.fixture(scope="session")
def cache_dir():
    return _cache


@pytest.fixture(scope="session")
def gpu():
    """The examples registry on device 0; skips the test where there is no driver or no GPU."""
    registry = kiln.examples_registry()
    try:
        registry.get("vector_add")
    except kiln.Error as e:
        if e.code in ("no_driver", "no_device"):
            pytest.skip(f"needs a GPU: {e}")
        raise
    return registry


@pytest.fixture(scope="session")
def cupy(gpu):
    return pytest.importorskip("cupy")


@pytest.fixture(scope="session")
def torch(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


@pytest.fixture(scope="session")
def spin(gpu):
    """A kernel that keeps one thread busy for `cycles` clocks: spin(1, 1, [numpy.int64(cycles)], stream=s)."""
    return kiln.program(SPIN, name_expressions=["spin"], label="tests/spin").get("spin")
