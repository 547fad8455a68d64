"""A generated registry from Python: kiln's examples, and one loaded from a shared library."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln


def test_examples_registry_lists_and_plans_without_a_gpu():
    registry = kiln.examples_registry()
    assert registry is not None and registry.name == "examples"
    assert {"vector_add", "scale_f32", "scale_f64", "block_sum_f32"} <= set(registry.kernels)
    assert kiln.examples_registry().name == registry.name


def test_precompile_the_examples_for_an_arch_without_a_gpu():
    results = kiln.examples_registry().precompile(80, ["vector_add"])
    assert len(results) == 1 and results[0].ok, results[0].error
    assert results[0].unit == "vector_add"


def test_warmup_without_a_driver_costs_nothing():
    registry = kiln.examples_registry()
    registry.request_warmup(["scale_f32"])
    assert isinstance(registry.ensure_warm(["scale_f32"], 0.5), list)
    assert registry.status().failed == 0
    with pytest.raises(ValueError, match="timeout_s"):
        registry.ensure_warm(["scale_f32"], -1)


def test_device_without_a_driver_is_a_kiln_error():
    try:
        device = kiln.examples_registry().device()
    except kiln.Error as e:
        assert e.code in ("no_driver", "no_device"), e
    else:
        assert device.arch >= 50 and device.name


def test_unknown_kernel_names_the_kernel():
    with pytest.raises(kiln.Error) as caught:
        kiln.examples_registry().plan("no_such_kernel")
    assert caught.value.code == "unknown_kernel" and "no_such_kernel" in str(caught.value)


def test_load_names_what_is_missing(tmp_path):
    with pytest.raises(kiln.Error) as caught:
        kiln.Registry.load(str(tmp_path / "missing.so"), "my::kernels")
    assert caught.value.code == "invalid_argument" and "missing.so" in str(caught.value)
    # The extension module itself is a shared library with no catalog of that name.
    with pytest.raises(kiln.Error, match="my::kernels::catalog"):
        kiln.Registry.load(kiln._kiln.__file__, "my::kernels")


def test_load_finds_a_generated_catalog_by_its_namespace():
    # A shared library of kiln's examples catalog, as a project builds its own (tests/meson.build).
    library = os.environ.get("KILN_TEST_CATALOG_LIBRARY")
    if not library:
        pytest.skip("run by meson test, which builds the library (KILN_TEST_CATALOG_LIBRARY)")
    registry = kiln.Registry.load(library, "kiln::examples")
    assert registry.name == "examples" and "vector_add" in registry.kernels
    # Or by an extern "C" catalog stamp (tests/python/catalog_accessor.cpp).
    assert kiln.Registry.load(library, "kiln_test_examples_catalog").name == "examples"
    with pytest.raises(kiln.Error, match="no_such_function"):
        kiln.Registry.load(library, "no_such_function")
    # A function, even one that returns a catalog, is not called: only a stamp is trusted.
    with pytest.raises(kiln.Error, match="kiln_test_examples_function.* is not a kiln catalog stamp"):
        kiln.Registry.load(library, "kiln_test_examples_function")


def load_in_child(path, name):
    """Registry.load(path, name) in a child Python, bounded: what it printed, or how it ended."""
    code = (
        "import sys, kiln\n"
        "try:\n"
        "    kiln.Registry.load(sys.argv[1], sys.argv[2])\n"
        "    print('loaded')\n"
        "except kiln.Error as e:\n"
        "    print('kiln.Error', e.code, e)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code, path, name], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "still running after 60 s"
    if done.returncode != 0:
        return f"ended with {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def test_load_refuses_a_symbol_that_is_not_a_catalog_stamp_without_calling_it():
    # puts is a function of every process: called as an accessor, it crashed the interpreter.
    said = load_in_child("libc.so.6", "puts")
    assert said.startswith("kiln.Error invalid_argument"), said
    assert "'puts' is not a kiln catalog stamp (it is a function)" in said, said
    # Data, too small to be a stamp; and large enough, but another library's: no kiln magic.
    said = load_in_child("libc.so.6", "environ")
    assert said.startswith("kiln.Error invalid_argument") and "an object of 8 bytes" in said, said
    said = load_in_child("libc.so.6", "_IO_2_1_stdout_")
    assert said.startswith("kiln.Error invalid_argument") and "no kiln magic" in said, said


def test_load_refuses_a_fifo_at_once(tmp_path):
    # dlopen() of a FIFO waits for a writer that never comes.
    fifo = tmp_path / "catalog.so"
    os.mkfifo(fifo)
    said = load_in_child(str(fifo), "my::kernels")
    assert said.startswith("kiln.Error invalid_argument"), said
    assert str(fifo) in said and "is a FIFO" in said, said


# --- GPU


def test_examples_kernels_on_cupy(cupy):
    registry = kiln.examples_registry()
    n = 1 << 12
    a = cupy.arange(n, dtype=cupy.float32)
    b = cupy.full(n, 3, dtype=cupy.float32)
    c = cupy.empty_like(a)
    add = registry.get("vector_add")
    assert add.name == "vector_add" and add.arch > 0
    add(n // 256, 256, [a, b, c, np.int32(n)])
    scale = registry.get("scale_f64")
    x = cupy.linspace(0, 1, n, dtype=cupy.float64)
    y = cupy.empty_like(x)
    scale(16, 256, [x, y, 0.5, np.int32(n)])
    cupy.cuda.Device().synchronize()
    np.testing.assert_allclose(cupy.asnumpy(c), np.arange(n, dtype=np.float32) + 3)
    np.testing.assert_allclose(cupy.asnumpy(y), 0.5 * np.linspace(0, 1, n))
    loaded = registry.plan("vector_add")
    assert loaded.available and loaded.tier == "memory" and loaded.source == add.source
    assert isinstance(loaded, kiln.LoadPlan) and kiln.Plan is kiln.LoadPlan
    assert registry.device().arch >= add.arch  # a binary runs on its arch or a later one


def test_examples_kernels_on_torch(torch):
    n = 1000
    a = torch.ones(n, device="cuda")
    b = torch.arange(n, dtype=torch.float32, device="cuda")
    c = torch.empty_like(a)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    kiln.examples_registry().get("vector_add")(4, 256, [a, b, c, np.int32(n)], stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), np.arange(n, dtype=np.float32) + 1)
