"""device=None, every device argument's default, is the current CUDA context's device, as CuPy's and PyTorch's
current device is: device 0 where no context is current, with no driver loaded to ask (here); the device a
CuPy or PyTorch scope selects on a GPU machine with two GPUs (skipped elsewhere)."""

import subprocess
import sys

import pytest

import kiln

KERNEL = r'''extern "C" __global__ void k(int* out) { out[0] = 1; }'''


def test_device_none_is_device_0_until_a_context_is_current():
    # The current device is the current CUDA context's; asking loads no driver (none is loaded here yet).
    script = (
        "import kiln\n"
        "assert kiln._kiln._current_device() == 0\n"
        "kiln.examples_registry()\n"
        "kiln.Program('extern \"C\" __global__ void k() {}', name_expressions=['k'])\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libcuda.so' not in maps, 'the driver was loaded'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_device_none_is_the_current_device(cupy):
    assert kiln._kiln._current_device() == cupy.cuda.runtime.getDevice()
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with cupy.cuda.Device(1):
        cupy.empty(1)  # the device's context made current, as any CuPy work on it does
        assert kiln._kiln._current_device() == 1
        assert kiln.examples_registry().device().ordinal == 1
        assert kiln.Program(KERNEL, name_expressions=["k"], label="tests/k").registry.device().ordinal == 1
    assert kiln._kiln._current_device() == 0


def test_device_none_follows_pytorch(torch):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    with torch.cuda.device(1):
        torch.empty(1, device="cuda")
        assert kiln._kiln._current_device() == 1
        assert kiln.examples_registry().device().ordinal == 1
