"""DLPack (__dlpack__ / __dlpack_device__) beside __cuda_array_interface__, for every array argument: the
primitives' arrays, with an operator or without, and a kernel's. Without a GPU, on tensors made with ctypes
(dlpack_export.py): what is read of them, the stream the producer is asked to order its work on, what is
refused. On a GPU (skipped without one): CuPy arrays and PyTorch tensors passed through DLPack alone."""

import numpy as np
import pytest
from dlpack_export import CPU, CUDA_HOST, CUDA_MANAGED, POINTER, USED, Exported, ExportedBefore1
from test_primitives import without_a_gpu

import kiln

needs_primitives = pytest.mark.skipif(not kiln.primitive_types(), reason="the package was built without primitives")


def array(export, stream=0, role="d_in"):
    return kiln.primitives._Array(export, role, "exclusive_sum", stream)


def invalid(kind, call, *args, **kwargs):
    with pytest.raises(kind) as e:
        call(*args, **kwargs)
    assert isinstance(e.value, kiln.Error) and e.value.code == "invalid_argument"
    return str(e.value)


@pytest.mark.parametrize("producer", [Exported, ExportedBefore1])
def test_a_dlpack_array_is_its_pointer_items_dtype_and_device(producer):
    export = producer((4, 8), "float64", byte_offset=64, device=(2, 3))
    a = array(export)
    assert (a.pointer, a.size, a.nbytes, a.dtype, a.device) == (POINTER + 64, 32, 256, "float64", 3)
    assert not a.read_only


def test_the_producer_is_asked_for_the_calls_stream():
    # The protocol's CUDA streams: 1 the legacy default stream (kiln's None, handle 0), a handle as it is,
    # -1 no synchronisation (a plan's maker reads no data).
    for handle, asked in ((0, 1), (0x5000, 0x5000), (None, -1)):
        export = Exported()
        array(export, handle)
        assert export.streams == [asked]
    before = ExportedBefore1()
    array(before, 0x6000)
    assert before.streams == [0x6000]


def test_strides_are_in_items():
    assert array(Exported((4, 8), strides=(8, 1))).size == 32  # C-contiguous, said explicitly
    assert array(Exported((4, 1), strides=(1, 99))).size == 4  # an extent of 1 has any stride
    message = invalid(ValueError, array, Exported((4, 8), strides=(1, 4)))
    assert "not contiguous" in message and "DLPack" in message


def test_what_is_not_a_cuda_device_array_is_refused():
    message = invalid(TypeError, array, Exported(device=(CPU, 0)))
    assert "CPU" in message and "d_in" in message
    assert "pinned host" in invalid(TypeError, array, Exported(device=(CUDA_HOST, 0)))
    assert array(Exported(device=(CUDA_MANAGED, 1))).device == 1  # managed memory is on the device too
    assert "DLPack 2.0" in invalid(TypeError, array, Exported(version=(2, 0)))
    assert "used once" in invalid(TypeError, array, Exported(name=USED))
    assert "lanes" in invalid(TypeError, array, Exported(lanes=4))

    class Elsewhere(Exported):
        def __dlpack_device__(self):
            return (2, 1)  # its tensors say device 0

    assert "__dlpack_device__() said (2, 1)" in invalid(ValueError, array, Elsewhere())
    # a dtype NumPy has no name for reaches the primitive's own check
    assert array(Exported(dtype="bfloat16")).dtype == "bfloat16"


def test_a_producer_that_fails_is_named():
    class Failing(Exported):
        def __dlpack__(self, **kwargs):
            raise BufferError("cannot export a tensor that requires grad")

    message = invalid(TypeError, array, Failing())
    assert "__dlpack__() failed" in message and "requires grad" in message


@needs_primitives
def test_a_read_only_output_is_refused():
    message = invalid(ValueError, kiln.exclusive_sum, Exported(16), Exported(16, read_only=True))
    assert "d_out is read-only" in message
    assert array(Exported(read_only=True)).read_only  # as an input it is read


@needs_primitives
def test_a_one_shot_call_asks_each_array_on_its_stream():
    without_a_gpu()
    d_in, d_out = Exported(16), Exported(16)
    with pytest.raises(kiln.Error) as e:
        kiln.exclusive_sum(d_in, d_out, stream=0x7000)
    assert e.value.code in ("no_driver", "no_device")
    assert d_in.streams == [0x7000] and d_out.streams == [0x7000]
    with pytest.raises(kiln.Error):
        kiln.make_exclusive_sum(d_in, d_out)
    assert d_in.streams[-1] == -1  # a plan's maker reads no data


def test_a_kernel_argument_through_dlpack_is_its_pointer():
    export = Exported(byte_offset=16)
    _, _, args, stream, _ = kiln._kiln._launch_layout(1, 1, [export], stream=0x8000)
    assert args[0] == (POINTER + 16).to_bytes(8, "little") and stream == 0x8000
    assert export.streams == [0x8000]
    _, _, args, _, _ = kiln._kiln._launch_layout(1, 1, [ExportedBefore1()])
    assert args[0] == POINTER.to_bytes(8, "little")
    with pytest.raises(TypeError, match="CPU") as e:
        kiln._kiln._launch_layout(1, 1, [Exported(device=(CPU, 0))])
    assert isinstance(e.value, kiln.Error) and "argument 0" in str(e.value)


# --- GPU: CuPy and PyTorch through DLPack (the lead runs these on a GPU machine; skipped here) -------------


class DLPackOnly:
    """A CuPy array or PyTorch tensor seen through DLPack alone."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


FILL = r'''extern "C" __global__ void fill(int* out, int value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}'''


def libraries(request):
    module = request.getfixturevalue(request.param)
    if request.param == "cupy":
        return module, module.asarray, module.asnumpy
    return module, lambda host: module.as_tensor(host, device="cuda"), lambda d: d.cpu().numpy()


@pytest.fixture(params=["cupy", "torch"])
def lib(request):
    return libraries(request)


def test_primitives_on_dlpack_arrays(lib):
    if not kiln.primitive_types():
        pytest.skip("the package was built without primitives")
    _, to_device, to_host = lib
    host = np.arange(1, 10_001, dtype=np.int64)
    d_in, d_out = to_device(host), to_device(np.zeros_like(host))
    assert kiln.exclusive_sum(DLPackOnly(d_in), DLPackOnly(d_out)).array is d_out
    np.testing.assert_array_equal(to_host(d_out), np.concatenate([[0], np.cumsum(host)[:-1]]))
    total = to_device(np.zeros(1, np.float64))
    kiln.reduce_sum(DLPackOnly(to_device(host.astype(np.float64))), DLPackOnly(total))
    assert to_host(total)[0] == host.sum()


def test_operators_on_dlpack_arrays(lib):
    if not kiln.operator_families():
        pytest.skip("the package was built without primitives")
    _, to_device, to_host = lib
    host = np.arange(1, 10_001, dtype=np.float64)
    d_in, largest, running = to_device(host), to_device(np.zeros(1)), to_device(np.zeros_like(host))
    assert kiln.reduce(DLPackOnly(d_in), "a > b ? a : b", -np.inf, DLPackOnly(largest)).array is largest
    assert to_host(largest)[0] == host.max()
    kiln.inclusive_scan(DLPackOnly(d_in), "a + b", DLPackOnly(running))
    np.testing.assert_array_equal(to_host(running), np.cumsum(host))


def test_a_kernel_on_dlpack_arrays(lib, gpu):
    _, to_device, to_host = lib
    out = to_device(np.zeros(1000, np.int32))
    fill = kiln.program(FILL, name_expressions=["fill"], label="tests/fill").get("fill")
    fill(4, 256, [DLPackOnly(out), np.int32(7), np.int32(1000)])
    np.testing.assert_array_equal(to_host(out), np.full(1000, 7, np.int32))
