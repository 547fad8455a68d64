"""Programs given at run time, from Python: the key, precompile without a GPU, errors, launches."""

import subprocess
import sys

import numpy as np
import pytest

import kiln

SAXPY = r"""
template <typename T>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

HEADED = r"""
#include "ops/twice.cuh"
extern "C" __global__ void twice(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = ops::twice(x[i]);
}
"""
TWICE = "namespace ops { __device__ inline float twice(float v) { return 2 * v; } }\n"


def saxpy_program(**changes):
    args = dict(name_expressions=["saxpy<float>", "saxpy<double>"], label="tests/saxpy")
    args.update(changes)
    return kiln.Program(changes.pop("source", SAXPY), **{k: v for k, v in args.items() if k != "source"})


def test_import_loads_no_driver():
    # In a process of its own: importing kiln, making a program and reading its digest load no CUDA
    # library (libkiln dlopens the driver on the first get()), so they work where there is none.
    script = (
        "import kiln\n"
        "kiln.program('__global__ void k() {}', name_expressions=['k']).digest\n"
        "kiln.examples_registry().kernels\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libcuda.so' not in maps and 'libnvrtc' not in maps, 'a CUDA library was loaded'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def test_digest_follows_every_input_but_the_label():
    base = saxpy_program()
    assert len(base.digest) == 64 and base.label == "tests/saxpy"
    assert saxpy_program(label="another name").digest == base.digest
    assert saxpy_program(source=SAXPY + "\n").digest != base.digest
    assert saxpy_program(options=["-DFAST"]).digest != base.digest
    assert saxpy_program(name_expressions=["saxpy<float>"]).digest != base.digest
    assert saxpy_program(headers={"extra.cuh": "// one"}).digest != saxpy_program(headers={"extra.cuh": "// two"}).digest


def test_same_content_is_the_same_program():
    first = kiln.program(SAXPY, name_expressions=["saxpy<float>"], label="one")
    assert kiln.program(SAXPY, name_expressions=["saxpy<float>"], label="two") is first  # found by content
    assert kiln.Program(SAXPY, name_expressions=["saxpy<float>"]).digest == first.digest


def test_precompile_without_a_gpu(cache_dir):
    program = kiln.Program(HEADED, headers={"ops/twice.cuh": TWICE}, name_expressions=["twice"], label="tests/twice")
    first = program.precompile(80)
    assert first.ok and first.compiled and not first.cached, first.error
    again = program.precompile(80)
    assert again.ok and again.cached and not again.compiled


def test_compile_all_compiles_many_programs_at_once_and_reports_each():
    programs = [kiln.Program(f"extern \"C\" __global__ void k{i}(int* x) {{ x[{i}] = {i}; }}",
                             name_expressions=[f"k{i}"], label=f"tests/many{i}") for i in range(6)]
    broken = kiln.Program("__global__ void broken() { no_such_thing(); }", name_expressions=["broken"],
                          label="tests/broken_in_a_batch")
    results = kiln.compile_all(programs + [broken], arch="sm_80")  # no GPU needed: into the disk cache
    assert [r.unit for r in results] == [p.label for p in programs] + ["tests/broken_in_a_batch"]
    assert all(r.ok and r.compiled for r in results[:-1]), [r.error for r in results]
    assert not results[-1].ok and "no_such_thing" in results[-1].error  # its own failure, the rest compiled
    assert results[-1].error_code == "compile" and results[0].error_code is None
    again = kiln.compile_all(programs, arch=80)
    assert all(r.ok and r.cached and not r.compiled for r in again)
    # Each program's estimate is now the time its compile took, kept in the cache directory.
    assert all(p.estimate_ms() > 0 for p in programs)
    with pytest.raises(ValueError, match="architecture"):
        kiln.compile_all(programs, arch="sm_x")
    with pytest.raises(TypeError):
        kiln.compile_all(programs, arch=True)


def test_a_compile_error_is_a_kiln_error_with_its_log():
    program = kiln.Program("__global__ void broken() { no_such_thing(); }", name_expressions=["broken"],
                           label="tests/broken")
    with pytest.raises(kiln.Error) as caught:
        program.precompile(80)
    assert caught.value.code == "compile"
    assert "tests/broken" in str(caught.value) and "no_such_thing" in str(caught.value)


def test_untrusted_input_is_refused_before_anything_compiles(tmp_path):
    # An option that writes a file, an include kiln cannot key, and too many name expressions: each a
    # kiln.Error naming it, and the file the option names is left alone.
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    with pytest.raises(kiln.Error) as caught:
        kiln.Program(SAXPY, options=[f"--create-pch={victim}"], name_expressions=["saxpy<float>"])
    assert caught.value.code == "invalid_argument" and "--create-pch" in str(caught.value)
    assert victim.read_text() == "the user's own file\n"
    with pytest.raises(kiln.Error) as caught:
        kiln.program(f'#include "{victim}"\n' + SAXPY, name_expressions=["saxpy<float>"], label="tests/abs")
    assert caught.value.code == "invalid_argument" and "absolute path" in str(caught.value)
    with pytest.raises(kiln.Error) as caught:
        kiln.Program(SAXPY, name_expressions=[f"saxpy<{i}>" for i in range(10_000)])
    assert "10000 name expressions" in str(caught.value)


def test_arguments_of_the_wrong_type_are_named():
    with pytest.raises(TypeError, match="options"):
        kiln.Program(SAXPY, options="-DFAST")  # one str, not a list
    with pytest.raises(TypeError, match="name_expressions"):
        kiln.Program(SAXPY, name_expressions=["saxpy<float>", 3])
    with pytest.raises(TypeError, match="headers"):
        kiln.Program(SAXPY, headers=["a.cuh"])


def test_unknown_kernel_is_a_kiln_error():
    with pytest.raises(kiln.Error) as caught:
        saxpy_program().plan("saxpy<half>")
    assert caught.value.code == "unknown_kernel"


class DeviceArray:
    """What CuPy, PyTorch and Numba arrays show: __cuda_array_interface__ with the data pointer."""

    def __init__(self, pointer):
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": (4,), "typestr": "<f4", "version": 3}


class Stream:
    def __init__(self, attribute, handle):
        setattr(self, attribute, handle)


def test_arguments_are_passed_as_cupy_passes_them():
    layout = kiln._kiln._launch_layout
    grid, block, args, stream, shared = layout(3, (128, 2), [DeviceArray(0x7F0000001000), np.float32(2.5),
                                                            np.int32(-7), np.uint8(9), 5, 1.5, None, True])
    assert grid == (3, 1, 1) and block == (128, 2, 1) and stream == 0 and shared == 0
    assert args[0] == (0x7F0000001000).to_bytes(8, "little")
    assert args[1] == np.float32(2.5).tobytes() and args[2] == np.int32(-7).tobytes() and args[3] == b"\x09"
    assert args[4] == np.int64(5).tobytes()      # a Python int is int64
    assert args[5] == np.float64(1.5).tobytes()  # a Python float is float64
    assert args[6] == bytes(8)                   # None is a null pointer
    assert args[7] == np.int64(1).tobytes()
    assert layout(1, 1, [], stream=42)[3] == 42
    assert layout(1, 1, [], stream=Stream("ptr", 43))[3] == 43           # CuPy
    assert layout(1, 1, [], stream=Stream("cuda_stream", 44))[3] == 44   # PyTorch
    # positional or by name, as Kernel.__call__ takes them
    assert layout(1, 1, [], 1024, 45)[3:] == (45, 1024)
    assert layout(args=[7], block=2, grid=1, stream=46, shared_mem=8) == ((1, 1, 1), (2, 1, 1),
                                                                         [np.int64(7).tobytes()], 46, 8)


def test_a_call_of_the_wrong_shape_is_a_type_error():
    layout = kiln._kiln._launch_layout
    with pytest.raises(TypeError, match="missing required argument 'args'"):
        layout(1, 1)
    with pytest.raises(TypeError, match="at most 5 arguments"):
        layout(1, 1, [], 0, None, None)
    with pytest.raises(TypeError, match="multiple values for argument 'grid'"):
        layout(1, 1, [], grid=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'streams'"):
        layout(1, 1, [], streams=None)
    with pytest.raises(TypeError, match="shared_mem: float"):
        layout(1, 1, [], shared_mem=1.5)
    with pytest.raises(ValueError, match="shared_mem: -1"):
        layout(1, 1, [], shared_mem=-1)
    with pytest.raises(TypeError, match="args \\(dict\\)"):
        layout(1, 1, {"a": 1})
    assert "shared_mem" in kiln.Kernel.__call__.__doc__ and "shared_mem" in kiln.Kernel.launch.__doc__


def test_a_kernel_is_callable():
    # Kernel.__call__ is set on the type after pybind11 made it: its instances must be callable through it.
    assert callable(kiln.Kernel.__new__(kiln.Kernel))


def test_a_kernel_made_without_one_is_refused():
    # An instance of __new__ alone holds no kernel: a clear TypeError, never a read of its empty memory.
    empty = kiln.Kernel.__new__(kiln.Kernel)
    with pytest.raises(TypeError, match="holds no kernel"):
        empty(1, 32, [])
    with pytest.raises(TypeError, match="holds no kernel"):
        empty.launch(1, 32, [])


def test_a_wrong_argument_is_named():
    layout = kiln._kiln._launch_layout
    with pytest.raises(TypeError, match="argument 1 \\(str\\)"):
        layout(1, 32, [np.float32(1), "x"])
    with pytest.raises(TypeError, match="argument 0 \\(ndarray\\).*host memory"):
        layout(1, 32, [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="argument 2.*64 bits"):
        layout(1, 32, [0, 0, 1 << 70])
    with pytest.raises(ValueError, match="block"):
        layout(1, 0, [])
    with pytest.raises(ValueError, match="grid"):
        layout((1, 1, 1, 1), 1, [])
    with pytest.raises(TypeError, match="stream"):
        layout(1, 1, [], stream="default")
    with pytest.raises(ValueError, match="argument 0.*data"):
        layout(1, 1, [Stream("__cuda_array_interface__", {})])


def test_numpy_scalars_of_every_size_and_many_arguments():
    layout = kiln._kiln._launch_layout
    scalars = [np.bool_(True), np.int8(-2), np.float16(1.5), np.uint16(7), np.int64(-(1 << 40)), np.float64(-0.25),
               np.complex64(1 - 2j), np.complex128(3 + 4j), np.longdouble(2.5)]
    assert layout(1, 1, scalars)[2] == [v.tobytes() for v in scalars]
    with pytest.raises(TypeError, match="argument 1 \\(void\\).*32 bytes"):
        layout(1, 1, [0, np.void(b"x" * 32)])
    many = list(range(-20, 20)) + [0.5, None] * 5  # past the arguments a launch keeps on the stack
    assert layout(1, 1, many)[2] == [np.int64(v).tobytes() if isinstance(v, int) else
                                           np.float64(v).tobytes() if v is not None else bytes(8) for v in many]
    assert layout(1, 1, (np.int32(1), 2))[2] == layout(1, 1, [np.int32(1), 2])[2]  # tuple or list
    assert layout(1, 1, [(1 << 64) - 1, -(1 << 63)])[2] == [b"\xff" * 8, (1 << 63).to_bytes(8, "little")]


class FakeModule:
    """A module of that name in sys.modules, for a test, and only where the real one is not loaded."""

    def __init__(self, monkeypatch, name, **members):
        if name in sys.modules:
            pytest.skip(f"the real {name} is loaded")
        module = type(sys)(name)
        for key, value in members.items():
            setattr(module, key, value)
        monkeypatch.setitem(sys.modules, name, module)


def test_a_cupy_array_is_passed_by_its_data_pointer(monkeypatch):
    # CuPy's __cuda_array_interface__ is a dict it builds on each read: a launch reads .data.ptr instead.
    class Memory:
        ptr = 0x7F0000002000

    class ndarray:  # noqa: N801 (CuPy's name)
        data = Memory()
        reads = 0

        @property
        def __cuda_array_interface__(self):
            type(self).reads += 1
            return {"data": (0x7F0000002000, False), "shape": (4,), "typestr": "<f4", "version": 3}

    FakeModule(monkeypatch, "cupy", ndarray=ndarray)

    class View(ndarray):  # CuPy's arrays are ndarray or derive from it
        data = type("Offset", (), {"ptr": 0x7F0000002010})()

    args = kiln._kiln._launch_layout(1, 1, [ndarray(), View()])[2]
    assert args == [(0x7F0000002000).to_bytes(8, "little"), (0x7F0000002010).to_bytes(8, "little")]
    assert ndarray.reads == 0


def test_a_torch_tensor_is_passed_by_its_data_ptr(monkeypatch):
    class Tensor:
        def __init__(self, is_cuda=True, requires_grad=False):
            self.is_cuda, self.requires_grad = is_cuda, requires_grad

        def data_ptr(self):
            return 0x7F0000003000

        @property
        def __cuda_array_interface__(self):
            if not self.is_cuda:
                raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type")
            if self.requires_grad:
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
            return {"data": (0x7F0000003000, False), "shape": (4,), "typestr": "<f4", "version": 3}

    FakeModule(monkeypatch, "torch", Tensor=Tensor)
    layout = kiln._kiln._launch_layout
    assert layout(1, 1, [Tensor()])[2] == [(0x7F0000003000).to_bytes(8, "little")]
    # what __cuda_array_interface__ refuses stays refused, named
    with pytest.raises(TypeError, match="argument 0 \\(Tensor\\): not a kernel argument"):
        layout(1, 1, [Tensor(is_cuda=False)])
    with pytest.raises(TypeError, match="argument 1 \\(Tensor\\).*requires grad"):
        layout(1, 1, [0, Tensor(requires_grad=True)])


def test_stream_handles():
    assert kiln._kiln._stream_handle(None) == 0
    assert kiln._kiln._stream_handle(Stream("ptr", 43)) == 43
    assert kiln._kiln._stream_handle(Stream("cuda_stream", 44)) == 44
    assert kiln._kiln._stream_handle(Stream("__cuda_stream__", lambda: (0, 45))) == 45
    with pytest.raises(ValueError, match="stream"):
        kiln._kiln._stream_handle(-1)
    with pytest.raises(TypeError, match="stream .*str, not an int"):
        kiln._kiln._stream_handle(Stream("ptr", "0x1"))


# --- GPU: the lead runs these on a GPU machine with CuPy and PyTorch; skipped here.


def test_launch_checks_on_a_gpu(gpu):
    kernel = saxpy_program().get("saxpy<float>")
    with pytest.raises(TypeError, match="argument 2"):
        kernel((1,), (32,), [np.float32(1), 0, "not an argument", np.int32(0)])
    with pytest.raises(TypeError, match="stream"):
        kernel((1,), (32,), [np.float32(1), 0, 0, np.int32(0)], stream="default")


def test_program_on_cupy_arrays(cupy):
    n = 1000
    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.ones(n, dtype=cupy.float32)
    kernel = saxpy_program().get("saxpy<float>")
    assert kernel.source in ("disk", "jit") and kernel.arch > 0 and kernel.load_ms >= 0
    stream = cupy.cuda.Stream()  # a blocking stream: it waits for the arrays' initialisation
    kernel(((n + 255) // 256,), (256,), [np.float32(2), x, y, np.int32(n)], stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(cupy.asnumpy(y), 2 * np.arange(n, dtype=np.float32) + 1)
    again = saxpy_program().get("saxpy<float>")
    assert again.tier == "memory"


def test_the_stream_is_honoured(cupy, spin):
    stream = cupy.cuda.Stream(non_blocking=True)
    # About 50 ms on any GPU's clock: the stream is still busy when the launch returns. Launched on the
    # default stream instead, it would leave `stream` idle.
    spin(1, 1, [np.int64(100_000_000)], stream=stream)
    assert not stream.done
    stream.synchronize()
    assert stream.done


def test_program_on_torch_tensors_on_a_stream(torch):
    n = 4096
    x = torch.arange(n, dtype=torch.float64, device="cuda")
    y = torch.zeros(n, dtype=torch.float64, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())  # x is made on the current stream
    # Work queued ahead on the stream: the launch must run after it, on that stream.
    with torch.cuda.stream(stream):
        y.fill_(1.0)
    saxpy_program().get("saxpy<double>").launch(n // 256, 256, [3.0, x, y, np.int32(n)], stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(y.cpu().numpy(), 3 * np.arange(n, dtype=np.float64) + 1)


def test_headers_in_memory_on_cupy(cupy):
    program = kiln.Program(HEADED, headers={"ops/twice.cuh": TWICE}, name_expressions=["twice"], label="tests/twice")
    x = cupy.arange(100, dtype=cupy.float32)
    program.get("twice")(1, 128, [x, np.int32(100)])
    cupy.cuda.Device().synchronize()
    np.testing.assert_allclose(cupy.asnumpy(x), 2 * np.arange(100, dtype=np.float32))


def test_architectures_are_numbers_or_sm_names_and_results_show_their_fields():
    program = kiln.Program(HEADED, headers={"ops/twice.cuh": TWICE}, name_expressions=["twice"], label="tests/sm_name")
    result = program.precompile("sm_80")
    assert result.ok, result.error
    assert program.precompile(80).cached  # the same architecture either way
    shown = repr(result)
    assert shown.startswith("kiln.PrecompileResult(") and "ok=True" in shown and f"unit={program.label!r}" in shown
    for bad, kind in (("sm_", ValueError), ("compute_80", ValueError), (8.0, TypeError), (False, TypeError)):
        with pytest.raises(kind):
            program.precompile(bad)


def test_python_m_kiln_runs_the_command_line():
    listed = subprocess.run([sys.executable, "-m", "kiln", "list"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "vector_add" in listed.stdout  # kiln's examples
    wrong = subprocess.run([sys.executable, "-m", "kiln", "--frobnicate"], capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2
