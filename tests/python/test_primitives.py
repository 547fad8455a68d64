"""kiln's primitives on device arrays: argument checks without a GPU; every family on CuPy arrays and PyTorch
tensors against NumPy, plans and one-shot calls, streams and devices on a GPU (skipped without one)."""

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln

# The 27 specs of kernels/primitives.toml, by primitive.
SPECS = {
    "exclusive_sum": ("int32", "int64"),
    "reduce_sum": ("float64", "int32"),
    "segmented_sum": ("float64", "int32"),
    "segmented_min": ("float64",),
    "segmented_max": ("float64",),
    "merge_sort_pairs": ("uint64",),
    "unique_by_key": ("int32", "uint64"),
    "radix_sort_pairs": ("float64", "int32", "int64", "uint64"),
    "select_indices": ("int32", "int64"),
    "lower_bound": ("float64", "int32", "int64", "uint64"),
    "upper_bound": ("float64", "int32", "int64", "uint64"),
    "segmented_sort": ("float64", "int32"),
}

needs_primitives = pytest.mark.skipif(not kiln.primitive_types(), reason="the package was built without primitives")


class DeviceArray:
    """What a CuPy array shows of itself, with no GPU behind it."""

    def __init__(self, shape=(16,), typestr="<i4", strides=None, pointer=0x7F0000001000):
        shape = (shape,) if isinstance(shape, int) else shape
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


def without_a_gpu():
    """Skips the test on a machine with a GPU, where the made-up pointers of its arrays must not reach it; here
    the driver's absence is a kiln.Error (no_driver, or no_device)."""
    try:
        kiln.examples_registry().device()
    except kiln.Error as e:
        assert e.code in ("no_driver", "no_device")
    else:
        pytest.skip("a GPU is here (the made-up pointers below must not reach it)")


def invalid(kind, call, *args, **kwargs):
    """The message of the kiln.Error (code invalid_argument) that call(*args) raises, which is also a `kind`."""
    with pytest.raises(kind) as e:
        call(*args, **kwargs)
    assert isinstance(e.value, kiln.Error) and e.value.code == "invalid_argument"
    return str(e.value)


@needs_primitives
def test_the_27_specs_are_there():
    assert {k: tuple(sorted(v)) for k, v in kiln.primitive_types().items()} == SPECS
    assert sum(len(v) for v in SPECS.values()) == 27


@needs_primitives
def test_a_dtype_not_supported_names_the_supported_ones():
    message = invalid(TypeError, kiln.exclusive_sum, DeviceArray(typestr="<f4"), DeviceArray(typestr="<f4"))
    assert "d_in is float32" in message and "int32, int64" in message
    message = invalid(TypeError, kiln.make_radix_sort_pairs, DeviceArray(typestr="<u4"), DeviceArray(typestr="<u4"),
                      DeviceArray(), DeviceArray())
    assert "float64, int32, int64, uint64" in message
    message = invalid(TypeError, kiln.segmented_reduce, DeviceArray(typestr="<i4"), DeviceArray(), op="min",
                      d_out=DeviceArray())
    assert "segmented_reduce" in message and "float64" in message
    with pytest.raises(kiln.Error, match="int32, int64") as e:  # the C++ side checks as well
        kiln._kiln._primitive("exclusive_sum", "float32", 0)
    assert e.value.code == "invalid_argument"


@needs_primitives
def test_arrays_of_a_call_must_agree():
    message = invalid(TypeError, kiln.exclusive_sum, DeviceArray(typestr="<i4"), DeviceArray(typestr="<i8"))
    assert "d_out is int64" in message
    message = invalid(TypeError, kiln.radix_sort_pairs, DeviceArray(typestr="<f8"), DeviceArray(typestr="<i8"),
                      DeviceArray(typestr="<f8"), DeviceArray(typestr="<i4"))  # values are int32
    assert "values_in is int64" in message
    message = invalid(TypeError, kiln.segmented_sort, DeviceArray(typestr="<f8"), DeviceArray(4, typestr="<i8"),
                      DeviceArray(typestr="<f8"))  # offsets are int32
    assert "offsets is int64" in message
    message = invalid(TypeError, kiln.select_indices, DeviceArray(typestr="<f4"), DeviceArray(typestr="<i8"),
                      DeviceArray(1, "<i8"))
    assert "mask is float32" in message


@needs_primitives
def test_sizes_strides_and_host_arrays_are_checked():
    message = invalid(ValueError, kiln.exclusive_sum, DeviceArray(16), DeviceArray(8))
    assert "d_out has 8 items; the call needs 16" in message
    message = invalid(ValueError, kiln.segmented_reduce, DeviceArray(16, "<f8"), DeviceArray(5),
                      d_out=DeviceArray(3, "<f8"))
    assert "d_out has 3 items; the call needs 4" in message
    message = invalid(ValueError, kiln.exclusive_sum, DeviceArray((4, 4), strides=(4, 16)), DeviceArray(16))
    assert "not contiguous" in message
    message = invalid(TypeError, kiln.exclusive_sum, np.zeros(4, np.int32))
    assert "ndarray" in message and "__cuda_array_interface__" in message
    message = invalid(ValueError, kiln.segmented_reduce, DeviceArray(16, "<f8"), DeviceArray(5), op="mean")
    assert "sum, min, max" in message


@needs_primitives
def test_outputs_are_made_only_for_cupy_and_torch():
    message = invalid(TypeError, kiln.exclusive_sum, DeviceArray(16))
    assert "d_out was not given" in message and "pass it" in message


def test_a_2d_contiguous_array_is_its_items():
    shaped = kiln.primitives._Array(DeviceArray((4, 8), strides=(32, 4)), "d_in", "exclusive_sum")
    assert shaped.size == 32 and shaped.dtype == "int32" and shaped.pointer == 0x7F0000001000


@needs_primitives
def test_without_a_gpu_the_first_call_is_a_kiln_error():
    # Arguments that pass the checks reach the driver only then: no_driver (no libcuda), or no_device.
    without_a_gpu()
    with pytest.raises(kiln.Error) as e:
        kiln.exclusive_sum(DeviceArray(16), DeviceArray(16))
    assert e.value.code in ("no_driver", "no_device")
    with pytest.raises(kiln.Error) as e:
        kiln.make_lower_bound(DeviceArray(16, "<f8"), DeviceArray(4, "<f8"), DeviceArray(4, "<i8"))
    assert e.value.code in ("no_driver", "no_device")
    with pytest.raises(kiln.Error) as e:  # an operator's link (kiln/operators.py) likewise
        kiln.reduce(DeviceArray(16, "<f4"), "a + b", 0.0, d_out=DeviceArray(1, "<f4"))
    assert e.value.code in ("no_driver", "no_device")


def test_primitives_load_no_driver_until_used():
    script = (
        "import kiln\n"
        "kiln.primitive_types()\n"
        "try:\n"
        "    kiln.exclusive_sum(object())\n"
        "except kiln.Error as e:\n"
        "    assert e.code == 'invalid_argument', e.code\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libcuda.so' not in maps and 'libnvrtc' not in maps, 'a CUDA library was loaded'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


# --- GPU: CuPy and PyTorch (the lead runs these on a GPU machine; skipped here) ---------------------------


class CuPy:
    def __init__(self, cupy):
        self.cupy = cupy

    def array(self, host):
        return self.cupy.asarray(host)

    def host(self, device):
        return self.cupy.asnumpy(device)

    def empty(self, n, dtype):
        return self.cupy.empty(n, dtype=dtype)

    def is_own(self, out):
        return isinstance(out, self.cupy.ndarray)

    def stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def fill_on(self, stream, array, value):
        with stream:
            array.fill(value)

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()


class Torch:
    def __init__(self, torch):
        self.torch = torch

    def array(self, host):
        return self.torch.as_tensor(host, device="cuda")

    def host(self, device):
        return device.cpu().numpy()

    def empty(self, n, dtype):
        return self.torch.empty(n, dtype=getattr(self.torch, np.dtype(dtype).name), device="cuda")

    def is_own(self, out):
        return isinstance(out, self.torch.Tensor) and out.is_cuda

    def stream(self):
        return self.torch.cuda.Stream()

    def fill_on(self, stream, array, value):
        with self.torch.cuda.stream(stream):
            array.fill_(value)

    def synchronize(self):
        self.torch.cuda.synchronize()


@pytest.fixture(params=["cupy", "torch"])
def lib(request):
    module = request.getfixturevalue(request.param)
    if not kiln.primitive_types():
        pytest.skip("the package was built without primitives")
    return CuPy(module) if request.param == "cupy" else Torch(module)


def synced(lib, *arrays):
    """The arrays on the host, after the GPU is done with them (one-shot calls run on the default stream)."""
    return [lib.host(a) for a in arrays]


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_exclusive_sum(lib, dtype):
    host = RNG.integers(-1000, 1000, 10_007).astype(dtype)
    d_in = lib.array(host)
    out = kiln.exclusive_sum(d_in)
    assert lib.is_own(out)
    expected = np.concatenate([[0], np.cumsum(host)[:-1]]).astype(dtype)
    np.testing.assert_array_equal(synced(lib, out)[0], expected)
    # a plan, with the caller's storage; in place
    plan = kiln.make_exclusive_sum(d_in, d_in)
    n = host.size
    temp = lib.empty(plan(None, d_in, d_in, n), "uint8")
    assert plan.temp_bytes(n) == plan(None, d_in, d_in, n)
    assert plan.source in ("embedded", "disk", "remote", "ptx", "jit")
    plan(temp, d_in, d_in, n)
    np.testing.assert_array_equal(synced(lib, d_in)[0], expected)
    with pytest.raises(kiln.Error, match="temporary storage") as e:
        plan(lib.empty(0, "uint8"), d_in, d_in, n)
    assert e.value.code == "invalid_argument"


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_reduce_sum(lib, dtype):
    host = RNG.integers(-1000, 1000, 100_003).astype(dtype)  # integer values: exact in any order
    d_in = lib.array(host)
    out = kiln.reduce_sum(d_in)
    assert lib.host(out).shape == () and lib.host(out) == host.sum()
    d_out = lib.empty(1, dtype)
    plan = kiln.make_reduce_sum(d_in, d_out)
    temp = lib.empty(plan.temp_bytes(host.size), "uint8")
    plan(temp, d_in, d_out, host.size)
    assert lib.host(d_out)[0] == host.sum()


@pytest.mark.parametrize("op,dtype", [("sum", "int32"), ("sum", "float64"), ("min", "float64"), ("max", "float64")])
def test_segmented_reduce(lib, op, dtype):
    host = RNG.integers(-1000, 1000, 5000).astype(dtype)
    offsets = np.array([0, 10, 10, 2000, 4999, 5000], np.int32)  # an empty segment
    out = lib.host(kiln.segmented_reduce(lib.array(host), lib.array(offsets), op=op))
    empty = {"sum": 0, "min": np.finfo(np.float64).max, "max": -np.finfo(np.float64).max}[op]
    reduce = {"sum": np.sum, "min": np.min, "max": np.max}[op]
    expected = [reduce(host[b:e]) if e > b else empty for b, e in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_array_equal(out, np.array(expected, dtype))


def test_merge_sort_pairs(lib):
    keys = RNG.integers(0, 50, 20_000).astype(np.uint64)  # many equal keys: stability shows
    values = np.arange(keys.size, dtype=np.int32)
    d_keys, d_values = lib.array(keys), lib.array(values)
    sorted_keys, sorted_values = kiln.merge_sort_pairs(d_keys, d_values)
    assert sorted_keys is d_keys and sorted_values is d_values  # in place
    order = np.argsort(keys, kind="stable")
    got_keys, got_values = synced(lib, d_keys, d_values)
    np.testing.assert_array_equal(got_keys, keys[order])
    np.testing.assert_array_equal(got_values, values[order])


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint64", "float64"])
def test_radix_sort_pairs(lib, dtype):
    keys = RNG.integers(0, 1000, 50_000).astype(dtype)
    if dtype in ("int32", "int64", "float64"):
        keys -= 500
    values = np.arange(keys.size, dtype=np.int32)
    d_keys, d_values = lib.array(keys), lib.array(values)
    got_keys, got_values = synced(lib, *kiln.radix_sort_pairs(d_keys, d_values))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(got_keys, keys[order])
    np.testing.assert_array_equal(got_values, values[order])
    np.testing.assert_array_equal(lib.host(d_keys), keys)  # out of place: the input is kept
    # a plan, twice on one storage
    keys_out, values_out = lib.empty(keys.size, dtype), lib.empty(keys.size, "int32")
    plan = kiln.make_radix_sort_pairs(d_keys, keys_out, d_values, values_out)
    temp = lib.empty(plan.temp_bytes(keys.size), "uint8")
    for _ in range(2):
        plan(temp, d_keys, keys_out, d_values, values_out, keys.size)
    np.testing.assert_array_equal(lib.host(values_out), values[order])


@pytest.mark.parametrize("dtype", ["int32", "uint64"])
def test_unique_by_key(lib, dtype):
    keys = np.sort(RNG.integers(0, 300, 10_000)).astype(dtype)
    values = np.arange(keys.size, dtype=np.int32)
    keys_out, values_out, count = kiln.unique_by_key(lib.array(keys), lib.array(values))
    count = int(lib.host(count)[0])
    first = np.concatenate([[True], keys[1:] != keys[:-1]])
    assert count == first.sum()
    np.testing.assert_array_equal(lib.host(keys_out)[:count], keys[first])
    np.testing.assert_array_equal(lib.host(values_out)[:count], values[first])


@pytest.mark.parametrize("mask_dtype,index_dtype", [("bool", "int64"), ("uint8", "int32")])
def test_select_indices(lib, mask_dtype, index_dtype):
    mask = (RNG.random(30_000) < 0.3).astype(mask_dtype)
    out, count = kiln.select_indices(lib.array(mask), dtype=index_dtype)
    count = int(lib.host(count)[0])
    assert lib.host(out).dtype == np.dtype(index_dtype)
    np.testing.assert_array_equal(lib.host(out)[:count], np.nonzero(mask)[0])


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint64", "float64"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_lower_and_upper_bound(lib, dtype, side):
    haystack = np.sort(RNG.integers(0, 500, 4000)).astype(dtype)
    needles = RNG.integers(0, 520, 3000).astype(dtype)
    search = kiln.lower_bound if side == "left" else kiln.upper_bound
    out = lib.host(search(lib.array(haystack), lib.array(needles)))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.searchsorted(haystack, needles, side=side))


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_segmented_sort(lib, dtype):
    keys = RNG.integers(-10_000, 10_000, 30_000).astype(dtype)
    offsets = np.array([0, 3, 3, 100, 2000, 29_000, 30_000], np.int32)  # short, empty, medium, long
    got = lib.host(kiln.segmented_sort(lib.array(keys), lib.array(offsets)))
    for b, e in zip(offsets[:-1], offsets[1:]):
        np.testing.assert_array_equal(got[b:e], np.sort(keys[b:e]))


def test_the_stream_is_honoured(lib, spin):
    # Queued behind ~50 ms of work on a non-blocking stream, the input is filled, then scanned: on that stream
    # the scan sees the filled input; on any other it would run first and see zeros.
    n = 1 << 16
    d_in = lib.array(np.zeros(n, np.int32))
    d_out = lib.array(np.full(n, -1, np.int32))
    stream = lib.stream()
    lib.synchronize()
    spin(1, 1, [np.int64(100_000_000)], stream=stream)
    lib.fill_on(stream, d_in, 1)
    kiln.exclusive_sum(d_in, d_out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(lib.host(d_out), np.arange(n, dtype=np.int32))
    # and a plan, on the same stream
    plan = kiln.make_reduce_sum(lib.array(np.zeros(1, np.int32)), lib.array(np.zeros(1, np.int32)))
    total = lib.array(np.zeros(1, np.int32))
    temp = lib.empty(plan.temp_bytes(n), "uint8")
    lib.synchronize()
    spin(1, 1, [np.int64(100_000_000)], stream=stream)
    lib.fill_on(stream, d_in, 2)
    plan(temp, d_in, total, n, stream=stream)
    stream.synchronize()
    assert lib.host(total)[0] == 2 * n


def test_one_shot_temporary_storage_from_cupys_pool(cupy):
    # A one-shot call takes its storage from CuPy's allocator when the call's stream is CuPy's current one,
    # and from the driver's pool on any other stream (CuPy's pool would reuse it unordered with the call).
    if not kiln.primitive_types():
        pytest.skip("the package was built without primitives")
    n = 1 << 20
    d_in = cupy.arange(n, dtype=cupy.int32)
    d_out = cupy.empty_like(d_in)
    need = kiln.make_exclusive_sum(d_in, d_out).temp_bytes(n)
    assert need > 0
    expected = np.concatenate([[0], np.cumsum(np.arange(n, dtype=np.int64))[:-1]]).astype(np.int32)
    cupy.cuda.Device().synchronize()
    pool = cupy.cuda.MemoryPool()
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(pool.malloc)
    try:
        kiln.exclusive_sum(d_in, d_out)  # the default stream, CuPy's current one
        assert pool.total_bytes() >= need and pool.used_bytes() == 0  # from CuPy's pool, given back
        np.testing.assert_array_equal(cupy.asnumpy(d_out), expected)
        side = cupy.cuda.Stream(non_blocking=True)
        held = pool.total_bytes()
        d_out.fill(0)
        cupy.cuda.Device().synchronize()
        kiln.exclusive_sum(d_in, d_out, stream=side)  # not CuPy's current stream: the driver's pool
        assert pool.total_bytes() == held
        side.synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_out), expected)
        d_out.fill(0)
        cupy.cuda.Device().synchronize()
        with side:  # now CuPy's current stream: its pool, on that stream
            kiln.exclusive_sum(d_in, d_out, stream=side)
            assert pool.total_bytes() > held
        side.synchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_out), expected)
    finally:
        cupy.cuda.set_allocator(previous)
    pool.free_all_blocks()


def test_one_shot_temporary_storage_from_torchs_allocator(torch):
    if not kiln.primitive_types():
        pytest.skip("the package was built without primitives")
    n = 1 << 20
    d_in = torch.arange(n, dtype=torch.int32, device="cuda")
    d_out = torch.empty_like(d_in)
    need = kiln.make_exclusive_sum(d_in, d_out).temp_bytes(n)
    assert need > 0
    expected = np.concatenate([[0], np.cumsum(np.arange(n, dtype=np.int64))[:-1]]).astype(np.int32)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    kiln.exclusive_sum(d_in, d_out)  # the default stream, PyTorch's current one
    assert torch.cuda.max_memory_allocated() >= held + need and torch.cuda.memory_allocated() == held
    np.testing.assert_array_equal(d_out.cpu().numpy(), expected)
    side = torch.cuda.Stream()
    d_out.zero_()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    kiln.exclusive_sum(d_in, d_out, stream=side)  # not PyTorch's current stream: the driver's pool
    assert torch.cuda.max_memory_allocated() == held
    side.synchronize()
    np.testing.assert_array_equal(d_out.cpu().numpy(), expected)
    d_out.zero_()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):  # now PyTorch's current stream: its allocator, on that stream
        kiln.exclusive_sum(d_in, d_out, stream=side)
    assert torch.cuda.max_memory_allocated() >= held + need
    side.synchronize()
    np.testing.assert_array_equal(d_out.cpu().numpy(), expected)


def test_arrays_on_another_device(cupy):
    if cupy.cuda.runtime.getDeviceCount() < 2 or not kiln.primitive_types():
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        d_in = cupy.arange(1000, dtype=cupy.int64)
    out = kiln.exclusive_sum(d_in)
    assert out.device.id == 1
    with cupy.cuda.Device(1):
        np.testing.assert_array_equal(cupy.asnumpy(out), np.concatenate([[0], np.cumsum(np.arange(999))]))
    with pytest.raises(kiln.Error, match="device"):
        kiln.exclusive_sum(d_in, cupy.empty(1000, cupy.int64))


def test_the_readme_quickstart(cupy):
    if not kiln.primitive_types():
        pytest.skip("the package was built without primitives")
    made = runpy.run_path(str(Path(__file__).with_name("quickstart.py")))
    np.testing.assert_array_equal(cupy.asnumpy(made["x"]), 2 * np.arange(1 << 20, dtype=np.float32))
    prefix = cupy.asnumpy(made["prefix"])  # int32 wraps, as the GPU's addition does
    np.testing.assert_array_equal(prefix, (np.cumsum(np.arange(1 << 20, dtype=np.int64)) - np.arange(1 << 20))
                                  .astype(np.int32))
    assert float(made["largest"]) == 2 * ((1 << 20) - 1)
