"""Operators given as CUDA C++ text from Python (kiln.Operator, kiln.reduce, ...): argument checks and the text
kiln compiles without a GPU; every family against NumPy, and the tiers a link comes from, on a GPU (skipped
without one)."""

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import operators

from dlpack_export import Exported
from test_primitives import RNG, DeviceArray, invalid, lib, synced, without_a_gpu  # noqa: F401 (lib: a fixture)

needs_operators = pytest.mark.skipif(not kiln.operator_families(), reason="the package was built without primitives")

MAX = "__device__ float op(float a, float b) { return a > b ? a : b; }"


# --- kiln.Operator -----------------------------------------------------------------------------------------


def test_an_operator_is_text():
    op = kiln.Operator(MAX)
    assert (op.source, op.name, op.expression) == (MAX, "op", False)
    assert kiln.Operator("a + b").expression and kiln.Operator("return a + b;").expression
    named = kiln.Operator("__device__ int plus(int a, int b) { return a + b; }", name="plus")
    assert named.name == "plus" and "plus" in repr(named) and repr(named).startswith("kiln.Operator(")
    assert len(repr(kiln.Operator("a + b" + " " * 200))) < 120


def test_an_operator_of_another_type_is_refused():
    for source in (b"a + b", 3, None, ["a + b"]):
        message = invalid(TypeError, kiln.Operator, source)
        assert "not a str" in message
    message = invalid(TypeError, kiln.Operator, "a + b", name=b"op")
    assert "name is a bytes" in message


def test_operator_text_is_checked():
    assert "empty" in invalid(ValueError, kiln.Operator, "  \n")
    assert "NUL" in invalid(ValueError, kiln.Operator, "a +\0 b")
    assert "at most" in invalid(ValueError, kiln.Operator, "a" * ((1 << 20) + 1))
    assert "not a C++ identifier" in invalid(ValueError, kiln.Operator, "a + b", name="my op")
    message = invalid(ValueError, kiln.Operator, "__device__ float maximum(float a, float b) { return a; }")
    assert "no function 'op'" in message and "name=" in message
    assert kiln.Operator("__device__ float maximum(float a, float b) { return a; }", name="maximum").name == "maximum"


# --- what kiln compiles ------------------------------------------------------------------------------------


@needs_operators
def test_an_expression_is_wrapped_for_the_dtype():
    text = kiln._kiln._operator_source("reduce", "float64", [kiln.Operator("a > b ? a : b")])
    assert ("__device__ double op(double a, double b) { using T = double; return (\n#line 1\n"
            "a > b ? a : b\n); }") in text
    assert "linked into reduce<double>" in text
    text = kiln._kiln._operator_source("select_if", "int64", [kiln.Operator("x % 3 == 0")])
    assert "__device__ bool op(long long x) { using T = long long; return (\n#line 1\nx % 3 == 0\n); }" in text
    text = kiln._kiln._operator_source("merge_sort_pairs", "uint32", [kiln.Operator("return a > b;")])
    assert ("__device__ bool op(unsigned int a, unsigned int b) { using T = unsigned int;\n#line 1\n"
            "return a > b;\n}") in text
    text = kiln._kiln._operator_source("transform_reduce", "float32", [kiln.Operator("x * x"), kiln.Operator("a + b")])
    assert "__device__ float transform_op(float x)" in text and "__device__ float reduce_op(float a, float b)" in text


def nvrtc_compile(source):
    """(NVRTC's result, its log) for `source` compiled as kiln compiles an operator (LTO-IR for compute_80, kiln's
    primitives' device headers found); skips where the toolkit has no NVRTC. Needs no GPU."""
    library = Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "lib64" / "libnvrtc.so"
    if not library.exists():
        pytest.skip(f"no NVRTC at {library}")
    nvrtc = ctypes.CDLL(str(library))
    program = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"operator.cu", 0, None, None) == 0
    options = [b"-arch=compute_80", b"-dlto", b"-rdc=true", b"-std=c++17",
               b"-I" + str(Path(__file__).parents[2] / "primitives" / "device").encode()]
    try:
        result = nvrtc.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return result, log.value.decode(errors="replace")


EXPRESSIONS = {"reduce": ("a > b ? a : b // the larger",), "exclusive_scan": ("a + b",), "inclusive_scan": ("a + b",),
               "segmented_reduce": ("T s = a + b; return s;",), "transform": ("x * x + T(1)",),
               "transform_reduce": ("x * x", "a + b"), "merge_sort_pairs": ("a > b",),
               "unique_by_key": ("a / T(10) == b / T(10)",), "select_if": ("x > T(0)",)}


@needs_operators
@pytest.mark.parametrize("family,dtype", [(f, "float32") for f in EXPRESSIONS] +
                         [("reduce", d) for d in ("int32", "uint32", "int64", "uint64", "float64")])
def test_a_wrapped_expression_compiles_under_nvrtc(family, dtype):
    source = kiln._kiln._operator_source(family, dtype, [kiln.Operator(e) for e in EXPRESSIONS[family]])
    result, log = nvrtc_compile(source)
    assert result == 0, log


@needs_operators
def test_nvrtcs_log_points_into_the_text_as_written():
    result, log = nvrtc_compile(kiln._kiln._operator_source("reduce", "float32", [kiln.Operator("a\n+* b")]))
    assert result != 0 and "operator op(2): error" in log
    source = kiln._kiln._operator_source("reduce", "float32", [kiln.Operator("__device__ int op(int a, int b);")])
    result, log = nvrtc_compile(source)
    assert result != 0 and "Expected=float (float, float), Given=int (int, int)" in log


@needs_operators
def test_a_definition_is_linked_as_written():
    text = kiln._kiln._operator_source("reduce", "float32", [kiln.Operator(MAX)])
    assert MAX in text and "linked_operator<float, float, float>" in text
    # two definitions of one name cannot share the translation unit
    with pytest.raises(kiln.Error, match="two operators are named 'op'") as e:
        kiln._kiln._operator_source("transform_reduce", "float32", [kiln.Operator(MAX), kiln.Operator(MAX)])
    assert e.value.code == "invalid_argument"


@needs_operators
def test_families_dtypes_and_counts_are_checked_in_cpp_too():
    assert kiln.operator_families() == {family: 2 if family == "transform_reduce" else 1 for family in operators._ROLES}
    assert "no family 'sort'" in invalid(ValueError, kiln._kiln._operator_plan, "sort", "int32", [], 0)
    message = invalid(TypeError, kiln._kiln._operator_plan, "reduce", "float16", [kiln.Operator("a + b")], 0)
    assert "int32, uint32, int64, uint64, float32, float64" in message
    assert "1 operator(s) expected, 2 given" in invalid(
        ValueError, kiln._kiln._operator_plan, "reduce", "int32", [kiln.Operator("a + b")] * 2, 0)


# --- arrays and values, before any driver call -------------------------------------------------------------


@needs_operators
def test_a_dtype_operators_do_not_take_names_the_ones_they_do():
    message = invalid(TypeError, kiln.reduce, DeviceArray(typestr="<f2"), "a + b", 0, d_out=DeviceArray(1, "<f2"))
    assert "d_in is float16" in message and "int32, uint32, int64, uint64, float32, float64" in message
    message = invalid(TypeError, kiln.select_if, DeviceArray(typestr="|b1"), "x", out=DeviceArray(typestr="|b1"),
                      count=DeviceArray(1, "<i8"))
    assert "d_in is bool" in message


@needs_operators
def test_an_operator_of_another_type_is_refused_by_every_family():
    x = DeviceArray(16, "<f4")
    for call in (lambda: kiln.reduce(x, 3, 0.0, d_out=x), lambda: kiln.inclusive_scan(x, None, d_out=x),
                 lambda: kiln.transform(x, b"x * x", d_out=x),
                 lambda: kiln.make_select_if(x, x, DeviceArray(1, "<i8"), ["x > 0"]),
                 lambda: kiln.transform_reduce(x, "x * x", 1.5, 0.0, d_out=x),
                 lambda: kiln.merge_sort_pairs(x, DeviceArray(16), op=0),
                 lambda: kiln.segmented_reduce(x, DeviceArray(5), op=len, init=0.0, d_out=x)):
        message = invalid(TypeError, call)
        assert "give CUDA C++ text (a str) or a kiln.Operator" in message


@needs_operators
def test_arrays_of_a_call_must_agree():
    x = DeviceArray(16, "<f4")
    assert "d_out is float64" in invalid(TypeError, kiln.reduce, x, "a + b", 0.0, d_out=DeviceArray(1, "<f8"))
    assert "count is int32" in invalid(TypeError, kiln.select_if, x, "x > 0", out=x, count=DeviceArray(1, "<i4"))
    assert "values is int64" in invalid(TypeError, kiln.merge_sort_pairs, x, DeviceArray(16, "<i8"), op="a > b")
    message = invalid(TypeError, kiln.unique_by_key, x, DeviceArray(16), keys_out=DeviceArray(16, "<i4"),
                      values_out=DeviceArray(16), num_selected=DeviceArray(1, "<u8"), op="a == b")
    assert "keys_out is int32" in message
    assert "d_out has 8 items" in invalid(ValueError, kiln.exclusive_scan, x, "a + b", 0.0, d_out=DeviceArray(8, "<f4"))


@needs_operators
def test_init_is_one_value_of_the_dtype():
    i32, f32 = DeviceArray(16, "<i4"), DeviceArray(16, "<f4")
    assert "init must be one int32 value, not 1.5" in invalid(TypeError, kiln.reduce, i32, "a + b", 1.5, d_out=i32)
    assert "does not fit int32" in invalid(ValueError, kiln.reduce, i32, "a + b", 1 << 40, d_out=i32)
    assert "does not fit uint32" in invalid(ValueError, kiln.exclusive_scan, DeviceArray(16, "<u4"), "a + b", -1,
                                            d_out=DeviceArray(16, "<u4"))
    assert "not True" in invalid(TypeError, kiln.reduce, i32, "a + b", True, d_out=i32)
    assert "not 'x'" in invalid(TypeError, kiln.reduce, f32, "a + b", "x", d_out=f32)
    assert "does not fit float32" in invalid(ValueError, kiln.reduce, f32, "a + b", 1e300, d_out=f32)
    message = invalid(TypeError, kiln.segmented_reduce, f32, DeviceArray(5), op="a + b", d_out=f32)
    assert "needs init" in message
    assert "takes no init" in invalid(ValueError, kiln.segmented_reduce, f32, DeviceArray(5), op="sum", init=0.0)


def test_a_plan_call_takes_its_arrays_size_and_init():
    # checked in Python before the plan is used: a made-up plan needs no GPU
    plan = object.__new__(kiln.OperatorPlan)
    plan._family, plan._native, plan.dtype, plan.device = "reduce", None, "float32", 0
    x = DeviceArray(16, "<f4")
    message = invalid(TypeError, plan, None, x, x, 16)
    assert "d_in, d_out, then n and init are expected" in message
    assert "n must be an int" in invalid(TypeError, plan, None, x, x, 1.0, 0.0)
    message = invalid(ValueError, plan, None, x, DeviceArray(16, "<f4"), 32, 0.0)
    assert "d_in has 16 items; the call needs 32" in message
    message = invalid(ValueError, plan, None, DeviceArray(16, "<f8"), DeviceArray(16, "<f8"), 16, 0.0)
    assert "this plan is for float32 on device 0, not float64" in message


@needs_operators
def test_an_output_that_is_read_only_is_refused():
    x = DeviceArray(16, "<f4")
    message = invalid(ValueError, kiln.reduce, x, "a + b", 0.0, d_out=Exported(1, "float32", read_only=True))
    assert "d_out is read-only" in message
    message = invalid(ValueError, kiln.merge_sort_pairs, x, Exported(16, read_only=True), op="a > b")
    assert "values is read-only" in message
    plan = object.__new__(kiln.OperatorPlan)
    plan._family, plan._native, plan.dtype, plan.device = "transform", None, "float32", 0
    assert "temp is read-only" in invalid(ValueError, plan, Exported(16, "uint8", read_only=True), x, x, 16)


def f32(n):
    return Exported(n, "float32")


# family: (its arrays as DLPack exports, a one-shot call of them with an operator on a stream)
ON_STREAM = {
    "reduce": (lambda: [f32(16), f32(1)], lambda a, s: kiln.reduce(a[0], "a + b", 0.0, a[1], stream=s)),
    "segmented_reduce": (lambda: [f32(16), Exported(5), f32(4)],
                         lambda a, s: kiln.segmented_reduce(a[0], a[1], op="a + b", init=0.0, d_out=a[2], stream=s)),
    "merge_sort_pairs": (lambda: [f32(16), Exported(16)],
                         lambda a, s: kiln.merge_sort_pairs(a[0], a[1], op="a > b", stream=s)),
    "unique_by_key": (lambda: [Exported(16) for _ in range(4)] + [Exported(1, "uint64")],
                      lambda a, s: kiln.unique_by_key(*a, op="a == b", stream=s)),
}


@needs_operators
@pytest.mark.parametrize("family", sorted(ON_STREAM))
def test_a_one_shot_call_asks_each_dlpack_array_on_its_stream(family):
    without_a_gpu()
    make, call = ON_STREAM[family]
    arrays = make()
    with pytest.raises(kiln.Error) as e:
        call(arrays, 0x7000)
    assert e.value.code in ("no_driver", "no_device")
    assert [a.streams for a in arrays] == [[0x7000]] * len(arrays)


@needs_operators
def test_a_plans_maker_asks_dlpack_arrays_for_no_stream():
    d_in, d_out = Exported(16, "float32"), Exported(1, "float32")
    try:
        kiln.make_reduce(d_in, d_out, "a + b")
    except kiln.Error:
        pass  # no driver here
    assert d_in.streams == [-1] and d_out.streams == [-1]


def test_operator_checks_load_no_driver():
    script = (
        "import kiln\n"
        "kiln.Operator('a + b')\n"
        "for call in (lambda: kiln.reduce(object(), 'a + b', 0), lambda: kiln.Operator(3)):\n"
        "    try:\n"
        "        call()\n"
        "    except kiln.Error as e:\n"
        "        assert e.code == 'invalid_argument', e.code\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libcuda.so' not in maps and 'libnvrtc' not in maps, 'a CUDA library was loaded'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


# --- GPU: every family against NumPy, on CuPy arrays and PyTorch tensors (skipped without a GPU) -----------


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_reduce_with_an_expression_and_a_definition(lib, dtype):
    host = RNG.integers(-1000, 1000, 100_003).astype(dtype)
    x = lib.array(host)
    out = kiln.reduce(x, "a > b ? a : b", np.iinfo(np.int32).min)
    assert lib.is_own(out) and lib.host(out).shape == () and lib.host(out) == host.max()
    t = {"float32": "float", "int64": "long long"}[dtype]
    definition = kiln.Operator(f"__device__ {t} smaller({t} a, const {t}& b) {{ return b < a ? b : a; }}", "smaller")
    d_out = lib.empty(1, dtype)
    plan = kiln.make_reduce(x, d_out, definition)
    assert plan.source in ("jit", "disk", "remote") and repr(plan).startswith("<kiln.reduce plan")
    temp = lib.empty(plan(None, x, d_out, host.size, 0), "uint8")
    assert plan.temp_bytes(host.size) == temp.shape[0]
    plan(temp, x, d_out, host.size, np.iinfo(np.int32).max)
    assert lib.host(d_out)[0] == host.min()
    plan(temp, x, d_out, 0, 7)  # no items: init
    assert lib.host(d_out)[0] == 7


@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_scans(lib, dtype):
    host = RNG.integers(-100, 100, 10_007).astype(dtype)
    x = lib.array(host)
    out = lib.host(kiln.exclusive_scan(x, "a + b", 5))
    np.testing.assert_array_equal(out, np.concatenate([[5], 5 + np.cumsum(host)[:-1]]).astype(dtype))
    out = lib.host(kiln.inclusive_scan(x, "a > b ? a : b"))
    np.testing.assert_array_equal(out, np.maximum.accumulate(host))
    kiln.inclusive_scan(x, "a + b", d_out=x)  # in place
    np.testing.assert_array_equal(lib.host(x), np.cumsum(host).astype(dtype))


@pytest.mark.parametrize("dtype", ["uint32", "float32"])
def test_transform_and_transform_reduce(lib, dtype):
    host = RNG.integers(0, 10, 5000).astype(dtype)  # squares summed exactly in float32, in any order
    x = lib.array(host)
    np.testing.assert_array_equal(lib.host(kiln.transform(x, "x * x + T(1) // a comment ends at its line")),
                                  host * host + 1)
    assert lib.host(kiln.transform_reduce(x, "x * x", "a + b", 3)) == 3 + (host.astype(np.float64) ** 2).sum()


def test_select_if(lib):
    host = RNG.integers(-50, 50, 20_000).astype(np.int64)
    out, count = kiln.select_if(lib.array(host), "x % 3 == 0")
    k = int(lib.host(count)[0])
    np.testing.assert_array_equal(lib.host(out)[:k], host[host % 3 == 0])


def test_segmented_reduce_with_an_operator(lib):
    host = RNG.integers(-1000, 1000, 5000).astype(np.float32)
    offsets = np.array([0, 10, 10, 2000, 4999, 5000], np.int32)
    out = lib.host(kiln.segmented_reduce(lib.array(host), lib.array(offsets), op="a > b ? a : b", init=-np.inf))
    expected = [host[b:e].max() if e > b else -np.inf for b, e in zip(offsets[:-1], offsets[1:])]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_merge_sort_pairs_descending(lib):
    host = RNG.integers(-20, 20, 10_000).astype(np.int32)
    keys, values = lib.array(host), lib.array(np.arange(host.size, dtype=np.int32))
    kiln.merge_sort_pairs(keys, values, op="a > b")
    order = np.argsort(-host, kind="stable")
    np.testing.assert_array_equal(lib.host(keys), host[order])
    np.testing.assert_array_equal(lib.host(values), order.astype(np.int32))


def test_unique_by_key_with_an_equality(lib):
    host = np.sort(RNG.integers(0, 1000, 10_000)).astype(np.uint64)
    keys_out, values_out, num = kiln.unique_by_key(lib.array(host), lib.array(np.arange(host.size, dtype=np.int32)),
                                                   op="a / 10 == b / 10")
    tens = host // 10
    first = np.concatenate([[True], tens[1:] != tens[:-1]])
    k = int(lib.host(num)[0])
    assert k == first.sum()
    np.testing.assert_array_equal(lib.host(keys_out)[:k], host[first])
    np.testing.assert_array_equal(lib.host(values_out)[:k], np.flatnonzero(first).astype(np.int32))


@needs_operators
def test_errors_of_an_operator_carry_nvrtcs_log(cupy):
    x = cupy.zeros(16, cupy.float32)
    with pytest.raises(kiln.Error) as e:
        kiln.reduce(x, "a +* b", 0.0)
    assert e.value.code == "compile" and "a +* b" in str(e.value)
    with pytest.raises(kiln.Error) as e:
        kiln.reduce(x, kiln.Operator("__device__ int op(int a, int b) { return a + b; }"), 0.0)
    message = str(e.value)
    assert e.value.code == "compile" and "is int (int, int)" in message and "calls it as float(float, float)" in message


TIERS = """
import json, sys, time
import cupy, kiln
x = cupy.arange(1 << 20, dtype=cupy.float64)
start = time.perf_counter()
out = kiln.reduce(x, sys.argv[1], 0.0)
first = time.perf_counter() - start
plan = kiln.make_reduce(x, out, sys.argv[1])
print(json.dumps({"source": plan.source, "value": float(out), "first_ms": first * 1e3}))
"""


def runs_in_new_processes(script, op, cache):
    """What `script` printed last (JSON) in each of two new processes given `op`, sharing the disk cache `cache`."""
    env = dict(os.environ, KILN_CACHE_DIR=str(cache))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script, op], env=env, check=True, timeout=300,
                              capture_output=True, text=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return runs


@needs_operators
def test_a_link_is_compiled_once_then_read_from_disk(cupy, tmp_path):
    """A new operator is linked by the JIT tier in the first process and read from disk in the next; in a
    process, its plan is kept."""
    op = f"a + b + T({os.getpid() % 1000} - {os.getpid() % 1000})"  # a text no cache has seen
    runs = runs_in_new_processes(TIERS, op, tmp_path / "cache")
    assert [r["source"] for r in runs] == ["jit", "disk"]
    assert runs[0]["value"] == runs[1]["value"] == float(np.arange(1 << 20).sum())
    x = cupy.ones(4, cupy.float64)
    assert kiln.make_reduce(x, x, "a + b")._native is kiln.make_reduce(x, x, "a + b")._native
