"""NumPy structured dtypes as the items of operators (kiln/structs.py, kiln/operators.py): the struct kiln
declares and the checks NVRTC makes of it, the dtypes it refuses, argument checks, all without a GPU; every
family on CuPy arrays of a structured dtype against NumPy, and the tiers, on a GPU (skipped without one)."""

import os
import runpy
from pathlib import Path

import numpy as np
import pytest

import kiln
from kiln import structs

from test_operators import needs_operators, nvrtc_compile, runs_in_new_processes
from test_primitives import DeviceArray, invalid, without_a_gpu

PAIR = np.dtype([("key", np.int32), ("w", np.float32)])  # packed (NumPy's alignment 1), 8 bytes
ALIGNED = np.dtype([("tag", np.uint8), ("w", np.float32)], align=True)  # 3 bytes of padding, alignment 4
SHORTS = np.dtype([("lo", np.int16), ("hi", np.int16)])  # 4 bytes
MISALIGNED = np.dtype([("a", np.int16), ("b", np.int32), ("c", np.int16)])  # b at offset 2, packed
NESTED = np.dtype([("p", [("x", np.float32), ("y", np.int16)]), ("v", np.uint8, (2,))])
GAPPED = np.dtype({"names": ["a", "b"], "formats": [np.uint8, np.int32], "offsets": [0, 4], "itemsize": 8})
WIDE = np.dtype([("key", np.int64), ("w", np.float64)])  # 16 bytes: the 16-byte kernels carry it
WIDE_ALIGNED = np.dtype([("key", np.int32), ("w", np.float64)], align=True)  # 4 bytes of padding, alignment 8


def declared(dtype):
    return structs.cpp_struct(dtype).declaration


# --- the struct ---------------------------------------------------------------------------------------------


def test_a_structured_dtype_is_a_struct_at_numpys_offsets():
    s = structs.cpp_struct(PAIR)
    assert s.name.startswith("kiln_struct_") and s.dtype == PAIR
    assert f"struct __attribute__((packed)) {s.name} {{\n  int key;\n  float w;\n}};" in s.declaration
    assert f"static_assert(sizeof({s.name}) == 8," in s.declaration
    assert f"static_assert(alignof({s.name}) == 1," in s.declaration
    assert f"sizeof({s.name}::w) == 4 && KILN_OFFSET_OF({s.name}, w) == 4" in s.declaration
    assert s.declaration.endswith(f"using T = {s.name};\n")
    assert structs.cpp_struct(PAIR) is s  # rendered once per dtype


def test_aligned_packed_gapped_nested_and_sub_arrays():
    a = structs.cpp_struct(ALIGNED)
    assert f"struct alignas(4) {a.name} {{\n  unsigned char tag;\n  float w;\n}};" in a.declaration
    g = structs.cpp_struct(GAPPED)  # NumPy's gap kept as bytes of padding, in a packed struct
    assert "  unsigned char a;\n  unsigned char kiln_pad_0[3];\n  int b;\n" in g.declaration
    m = structs.cpp_struct(MISALIGNED)
    assert "KILN_OFFSET_OF(" + m.name + ", b) == 2" in m.declaration
    n = structs.cpp_struct(NESTED)
    inner = structs.cpp_struct(NESTED.fields["p"][0]).name
    assert n.declaration.index(f"struct __attribute__((packed)) {inner}") < n.declaration.index(f"{n.name} {{")
    assert f"  {inner} p;\n  unsigned char v[2];\n" in n.declaration
    trailing = structs.cpp_struct(np.dtype({"names": ["a"], "formats": [np.int32], "itemsize": 8}))
    assert "  int a;\n  unsigned char kiln_pad_0[4];\n" in trailing.declaration
    # the name is the layout's: another layout of the same fields is another struct
    assert len({structs.cpp_struct(d).name for d in (PAIR, np.dtype(PAIR.descr, align=True), ALIGNED)}) == 3


@pytest.mark.parametrize("dtype,message", [
    (np.dtype([("h", np.float16)]), "'h' is float16, which kiln does not map"),
    (np.dtype([("z", np.complex64)]), "'z' is complex64"),
    (np.dtype([("s", "S4")]), "'s' is |S4"),
    (np.dtype([("k", ">i4")]), "'k' is big-endian"),
    (np.dtype([("class", np.int32)]), "'class' is not a name a C++ struct can have"),
    (np.dtype([("my key", np.int32)]), "'my key' is not a name"),
    (np.dtype([("T", np.int32)]), "'T' is not a name"),
    (np.dtype([("kiln_pad_0", np.int32)]), "'kiln_pad_0' is not a name"),
    (np.dtype([("v", np.int32, (0,))]), "'v' is an empty sub-array"),
    (np.dtype([("p", [("q", np.float16)])]), "'p''s field 'q' is float16"),
    (np.dtype({"names": ["a", "b"], "formats": [np.int32, np.int32], "offsets": [0, 2]}), "'a' and 'b' overlap"),
    (np.dtype(np.int32), "is not a structured dtype"),
])
def test_a_dtype_kiln_cannot_render_is_refused_naming_the_field(dtype, message):
    with pytest.raises(TypeError) as e:
        structs.cpp_struct(dtype)
    assert isinstance(e.value, kiln.Error) and e.value.code == "invalid_argument"
    assert message in str(e.value)


def test_one_value_of_a_structured_dtype_is_its_bytes():
    expected = np.array((3, 1.5), PAIR).tobytes()
    assert structs.value_bytes((3, 1.5), PAIR, "init") == expected
    assert structs.value_bytes(np.void((3, 1.5), dtype=PAIR), PAIR, "init") == expected
    assert structs.value_bytes(np.array([(3, 1.5)], PAIR), PAIR, "init") == expected
    assert "of dtype" in invalid(TypeError, structs.value_bytes, np.zeros(1, ALIGNED), PAIR, "init")
    assert "2 items" in invalid(ValueError, structs.value_bytes, np.zeros(2, PAIR), PAIR, "init")
    assert "a tuple of its fields" in invalid(TypeError, structs.value_bytes, [3, 1.5], PAIR, "init")
    assert "not one" in invalid(ValueError, structs.value_bytes, (1 << 40, 0.0), PAIR, "init")
    assert "not one" in invalid(ValueError, structs.value_bytes, (1, 2.0, 3), PAIR, "init")


# --- what NVRTC compiles (no GPU) ---------------------------------------------------------------------------

# family: (operators over a struct with fields key-like first and w-like second), for PAIR
EXPRESSIONS = {
    "reduce": ("a.w < b.w ? b : a",), "exclusive_scan": ("T s = a; s.w += b.w; s.key += b.key; return s;",),
    "inclusive_scan": ("T s = a; s.w += b.w; return s;",), "segmented_reduce": ("a.w < b.w ? b : a",),
    "transform": ("T y = x; y.w = -x.w; return y;",), "transform_reduce": ("x", "a.w < b.w ? b : a"),
    "merge_sort_pairs": ("a.w < b.w",), "unique_by_key": ("a.key == b.key",), "select_if": ("x.w > 0.f",)}


def source(family, dtype, ops):
    s = structs.cpp_struct(dtype)
    carrier = kiln.operators._CARRIERS[dtype.itemsize]
    return kiln._kiln._operator_source(family, carrier, [kiln.Operator(o) for o in ops], s.name, s.declaration)


@needs_operators
def test_an_operator_over_a_struct_is_handed_the_struct():
    text = source("reduce", PAIR, EXPRESSIONS["reduce"])
    name = structs.cpp_struct(PAIR).name
    assert f"__device__ {name} op({name} a, {name} b) {{ using T = {name}; return (\n#line 1\na.w < b.w ? b : a" in text
    assert ("__device__ unsigned long long kiln_bits_op(unsigned long long a0, unsigned long long a1) {\n"
            f"  const {name} result = op(kiln_bits_as<{name}>(a0), kiln_bits_as<{name}>(a1));") in text
    assert "linked_operator<unsigned long long, unsigned long long, unsigned long long>" in text
    assert "linked into reduce<unsigned long long>" in text  # the carrier's plan, named after the dtype is known
    text = source("select_if", SHORTS, ("x.lo < x.hi",))
    assert "__device__ bool kiln_bits_op(unsigned int a0) {\n  const bool result = op(" in text
    text = source("transform", WIDE, EXPRESSIONS["transform"])
    assert "__device__ kiln_prim::bytes16 kiln_bits_op(kiln_prim::bytes16 a0) {" in text
    assert "linked into transform<kiln_prim::bytes16>" in text


@needs_operators
@pytest.mark.parametrize("family", sorted(EXPRESSIONS))
@pytest.mark.parametrize("dtype", [PAIR, WIDE, WIDE_ALIGNED], ids=["8 bytes", "16 bytes", "16 bytes aligned"])
def test_every_family_over_a_struct_compiles_under_nvrtc(family, dtype):
    result, log = nvrtc_compile(source(family, dtype, EXPRESSIONS[family]))
    assert result == 0, log


@needs_operators
@pytest.mark.parametrize("dtype,op", [(ALIGNED, "a.w < b.w ? b : a"), (SHORTS, "T s = {short(a.lo + b.lo), a.hi}; "
                                                                               "return s;"),
                                      (MISALIGNED, "T s = a; s.b += b.b; return s;"),
                                      (NESTED, "a.p.x < b.p.x ? b : a"), (GAPPED, "a.b < b.b ? b : a")])
def test_each_layout_compiles_and_checks_itself_under_nvrtc(dtype, op):
    text = source("reduce", dtype, (op,))
    result, log = nvrtc_compile(text)
    assert result == 0, log
    # a layout kiln rendered wrongly is a compile error, not items read at the wrong bytes
    name = structs.cpp_struct(dtype).name
    wrong = text.replace(f"static_assert(sizeof({name}) == {dtype.itemsize},",
                         f"static_assert(sizeof({name}) == {dtype.itemsize + 1},")
    assert wrong != text
    result, log = nvrtc_compile(wrong)
    assert result != 0 and "NumPy's itemsize" in log


@needs_operators
def test_the_offsets_are_checked_under_nvrtc():
    name = structs.cpp_struct(PAIR).name
    text = source("reduce", PAIR, EXPRESSIONS["reduce"]).replace(f"KILN_OFFSET_OF({name}, w) == 4",
                                                                  f"KILN_OFFSET_OF({name}, w) == 2")
    result, log = nvrtc_compile(text)
    assert result != 0 and "field 'w'" in log and "as NumPy lays it out" in log


@needs_operators
def test_an_operator_returning_another_type_names_it():
    result, log = nvrtc_compile(source("reduce", PAIR, ("__device__ int op(T a, T b) { return a.key; }",)))
    assert result != 0 and "int" in log and structs.cpp_struct(PAIR).name in log
    result, log = nvrtc_compile(source("reduce", PAIR, ("a.w",)))
    assert result != 0


@needs_operators
def test_the_struct_is_in_the_text_the_key_is_made_of():
    same = source("reduce", PAIR, EXPRESSIONS["reduce"])
    assert same == source("reduce", PAIR, EXPRESSIONS["reduce"])
    other = np.dtype([("key", np.float32), ("w", np.float32)])  # same size, names and expression
    assert source("reduce", other, EXPRESSIONS["reduce"]) != same


@needs_operators
def test_a_struct_is_carried_by_the_unsigned_types_only():
    s = structs.cpp_struct(PAIR)
    message = invalid(TypeError, kiln._kiln._operator_source, "reduce", "float64", [kiln.Operator("a")], s.name,
                      s.declaration)
    assert "carried as uint32, uint64 or bytes16" in message
    # the 16-byte carrier takes structs only
    message = invalid(TypeError, kiln._kiln._operator_source, "reduce", "bytes16", [kiln.Operator("a")], "", "")
    assert "no bytes16 (operators take int32" in message
    message = invalid(ValueError, kiln._kiln._operator_source, "reduce", "uint64", [kiln.Operator("a")], "my struct",
                      s.declaration)
    assert "not a C++ identifier" in message


# --- arrays and values, before any driver call -------------------------------------------------------------


class StructArray(DeviceArray):
    """What a record array (Numba's) shows through __cuda_array_interface__: typestr |V<n> and descr."""

    def __init__(self, n, dtype, pointer=0x7F0000001000):
        super().__init__(n, f"|V{dtype.itemsize}", pointer=pointer)
        self.__cuda_array_interface__["descr"] = dtype.descr


def test_a_record_arrays_interface_gives_its_structured_dtype():
    a = kiln.primitives._Array(StructArray(16, GAPPED), "d_in", "reduce")
    assert a.dtype == str(GAPPED) and kiln.primitives._STRUCTURED[a.dtype] == GAPPED and a.size == 16
    assert a.nbytes == 16 * 8
    plain = kiln.primitives._Array(DeviceArray(16, "|V8"), "d_in", "reduce")  # no fields: bytes, as before
    assert plain.dtype == "|V8"
    bad = StructArray(16, PAIR)
    bad.__cuda_array_interface__["typestr"] = "|V12"
    assert "a descr of 8 bytes and a typestr |V12" in invalid(ValueError, kiln.primitives._Array, bad, "d_in", "reduce")


@needs_operators
def test_struct_arrays_are_checked_before_any_driver_call():
    x = StructArray(16, PAIR)
    message = invalid(TypeError, kiln.reduce, StructArray(16, ALIGNED), "a", (0, 0.0), d_out=x)
    assert "d_out is [('key', '<i4'), ('w', '<f4')], d_in {" in message  # the arrays' dtypes disagree
    wide = np.dtype([("a", np.float64), ("b", np.int32)])
    message = invalid(TypeError, kiln.reduce, StructArray(16, wide), "a", (0.0, 0), d_out=StructArray(1, wide))
    assert "is 12 bytes; an operator takes structs of 4, 8 or 16 bytes" in message
    message = invalid(ValueError, kiln.reduce, StructArray(16, WIDE, pointer=0x7F0000001008), "a", (0, 0.0),
                      d_out=StructArray(1, WIDE))
    assert "d_in is at 0x7f0000001008, not aligned to its 16-byte items" in message
    message = invalid(ValueError, kiln.reduce, StructArray(16, PAIR, pointer=0x7F0000001004), "a", (0, 0.0),
                      d_out=StructArray(1, PAIR))
    assert "d_in is at 0x7f0000001004, not aligned to its 8-byte items" in message
    assert "init must be one" in invalid(TypeError, kiln.reduce, x, "a", 0.0, d_out=x)
    assert "init must be one" in invalid(TypeError, kiln.reduce, x, "a", None, d_out=x)
    bad = np.dtype([("h", np.float16), ("x", np.float16), ("y", np.int32)])
    assert "'h' is float16" in invalid(TypeError, kiln.reduce, StructArray(4, bad), "a", (0, 0, 0),
                                       d_out=StructArray(1, bad))
    message = invalid(TypeError, kiln.exclusive_sum, x, x)  # the fixed primitives take no struct
    assert "d_in is [('key', '<i4'), ('w', '<f4')]; kiln.exclusive_sum takes" in message


@needs_operators
def test_a_struct_call_passes_the_checks_and_reaches_the_driver():
    without_a_gpu()
    x = StructArray(16, PAIR)
    with pytest.raises(kiln.Error) as e:
        kiln.reduce(x, EXPRESSIONS["reduce"][0], (0, -np.inf), d_out=StructArray(1, PAIR))
    assert e.value.code in ("no_driver", "no_device")


# --- GPU: every family on CuPy arrays of a structured dtype (skipped without a GPU) ------------------------

RNG = np.random.default_rng(11)


def pairs(n, dtype=PAIR):
    host = np.zeros(n, dtype)
    host["key"] = np.arange(n)
    host["w"] = RNG.integers(-1000, 1000, n)  # whole numbers: sums exact in float32 in any order
    return host


def device(cupy, host):
    """A CuPy array of host's structured dtype (cupy.asarray takes no structured array: its bytes, viewed)."""
    return cupy.asarray(host.view(np.uint8)).view(host.dtype)


@pytest.fixture
def ops(cupy):
    if not kiln.operator_families():
        pytest.skip("the package was built without primitives")
    return cupy


@pytest.mark.parametrize("dtype", [PAIR, WIDE], ids=["8 bytes", "16 bytes"])
def test_reduce_and_transform_reduce_over_structs(ops, dtype):
    host = pairs(100_003, dtype)
    x = device(ops, host)
    out = kiln.reduce(x, "a.w < b.w || (a.w == b.w && b.key < a.key) ? b : a", (-1, -np.inf))
    assert isinstance(out, ops.ndarray) and out.dtype == dtype
    top = out.get()[()] if out.shape == () else out.get()[0]
    best = np.lexsort((host["key"], -host["w"]))[0]
    assert (top["key"], top["w"]) == (host["key"][best], host["w"][best])
    d_out = ops.empty(1, dtype)
    plan = kiln.make_transform_reduce(x, d_out, "T y = x; y.w = x.w * x.w; return y;",
                                      "T s = a; s.w = a.w + b.w; s.key = a.key + b.key; return s;")
    temp = ops.empty(plan.temp_bytes(host.size), ops.uint8)
    plan(temp, x, d_out, host.size, np.void((0, 0.0), dtype=dtype))
    got = d_out.get()[0]
    assert got["key"] == host["key"].sum(dtype=dtype["key"])  # wrapped, as the GPU's addition of the type
    assert np.isclose(got["w"], (host["w"].astype(np.float64) ** 2).sum(), rtol=1e-4)  # in CUB's order


@pytest.mark.parametrize("dtype", [PAIR, WIDE], ids=["8 bytes", "16 bytes"])
def test_scans_over_structs(ops, dtype):
    host = pairs(10_007, dtype)
    x = device(ops, host)
    plus = "T s; s.key = a.key + b.key; s.w = a.w + b.w; return s;"
    out = kiln.inclusive_scan(x, plus).get()
    np.testing.assert_array_equal(out["w"], np.cumsum(host["w"]))
    np.testing.assert_array_equal(out["key"], np.cumsum(host["key"]).astype(dtype["key"]))
    out = kiln.exclusive_scan(x, plus, (5, 0.5)).get()
    np.testing.assert_array_equal(out["w"], np.concatenate([[0.5], 0.5 + np.cumsum(host["w"])[:-1]]).astype(dtype["w"]))


@pytest.mark.parametrize("dtype", [PAIR, WIDE], ids=["8 bytes", "16 bytes"])
def test_transform_and_select_if_over_structs(ops, dtype):
    host = pairs(20_000, dtype)
    x = device(ops, host)
    out = kiln.transform(x, "T y; y.key = -x.key; y.w = x.w * 2.f; return y;").get()
    np.testing.assert_array_equal(out["key"], -host["key"])
    np.testing.assert_array_equal(out["w"], host["w"] * 2)
    kept, count = kiln.select_if(x, "x.w > 0.f && x.key % 3 == 0")
    k = int(count.get()[0])
    assert kept.dtype == dtype
    np.testing.assert_array_equal(kept.get()[:k], host[(host["w"] > 0) & (host["key"] % 3 == 0)])


@pytest.mark.parametrize("dtype", [PAIR, WIDE], ids=["8 bytes", "16 bytes"])
def test_segmented_reduce_over_structs(ops, dtype):
    host = pairs(5000, dtype)
    offsets = np.array([0, 10, 10, 2000, 4999, 5000], np.int32)
    out = kiln.segmented_reduce(device(ops, host), ops.asarray(offsets), op="a.w < b.w ? b : a",
                                init=(-1, -np.inf)).get()
    for i, (b, e) in enumerate(zip(offsets[:-1], offsets[1:])):
        if e == b:
            assert (out[i]["key"], out[i]["w"]) == (-1, -np.inf)
        else:
            assert out[i]["w"] == host["w"][b:e].max()


@pytest.mark.parametrize("dtype", [PAIR, WIDE], ids=["8 bytes", "16 bytes"])
def test_sorts_and_unique_over_struct_keys(ops, dtype):
    host = pairs(10_000, dtype)
    host["key"] = RNG.integers(0, 50, host.size)
    keys, values = device(ops, host), ops.arange(host.size, dtype=ops.int32)
    kiln.merge_sort_pairs(keys, values, op="a.key < b.key || (a.key == b.key && a.w > b.w)")
    order = np.lexsort((-host["w"], host["key"]))
    np.testing.assert_array_equal(keys.get(), host[order])
    keys_out, values_out, num = kiln.unique_by_key(keys, values, op="a.key == b.key")
    k = int(num.get()[0])
    first = np.concatenate([[True], host["key"][order][1:] != host["key"][order][:-1]])
    assert k == first.sum()
    np.testing.assert_array_equal(keys_out.get()[:k], host[order][first])


@pytest.mark.parametrize("dtype", [ALIGNED, SHORTS, MISALIGNED, NESTED, WIDE_ALIGNED])
def test_other_layouts_reduce_as_numpy_sees_them(ops, dtype):
    host = np.zeros(4099, dtype)
    raw = host.view(np.uint8).reshape(host.size, dtype.itemsize)
    raw[:] = RNG.integers(0, 256, raw.shape)  # every byte, padding too: the operator must read the fields only
    first = dtype.names[0]
    if dtype is NESTED:
        host["p"]["x"] = RNG.integers(-100, 100, host.size)
        op, value = "a.p.x < b.p.x ? b : a", lambda h: h["p"]["x"]
    elif dtype is SHORTS:
        op, value = "a.lo < b.lo ? b : a", lambda h: h["lo"]
    else:
        field = "w" if "w" in dtype.names else "b"
        if dtype[field].kind == "f":
            host[field] = RNG.integers(-100, 100, host.size)
        op, value = f"a.{field} < b.{field} ? b : a", lambda h: h[field]
    out = kiln.reduce(device(ops, host), op, host[0]).get()
    assert value(out[()] if out.shape == () else out[0]) == value(host).max(), first


def test_a_record_array_of_another_library_through_its_interface(ops):
    host = pairs(1000)
    buffer = ops.asarray(host.view(np.uint8))

    class Records:  # a library with record arrays (Numba's), seen through its interface alone
        __cuda_array_interface__ = {"data": (buffer.data.ptr, False), "shape": (host.size,), "typestr": "|V8",
                                    "descr": PAIR.descr, "strides": None, "version": 3}

    d_out = ops.empty(1, PAIR)
    kiln.reduce(Records(), "a.w < b.w ? b : a", (0, -np.inf), d_out=d_out)
    assert d_out.get()[0]["w"] == host["w"].max()


def test_the_guides_struct_example(ops):
    made = runpy.run_path(str(Path(__file__).with_name("structs_example.py")))
    host = made["host"]
    heaviest = made["heaviest"].get()
    assert heaviest[()]["w"] == host["w"].max()
    k = int(made["count"].get()[0])
    np.testing.assert_array_equal(made["kept"].get()[:k], host[host["w"] > 0])


TIERS = """
import json, sys
import cupy, numpy, kiln
pair = numpy.dtype([("key", numpy.int32), ("w", numpy.float32)])
x = cupy.asarray(numpy.zeros(1 << 16, pair).view(numpy.uint8)).view(pair)
out = kiln.reduce(x, sys.argv[1], (0, 0.0))
print(json.dumps({"source": kiln.make_reduce(x, out, sys.argv[1]).source}))
"""


def test_a_struct_operator_is_linked_once_then_read_from_disk(ops, tmp_path):
    op = f"a.w < b.w ? b : a /* {os.getpid()} */"  # a text no cache has seen
    assert [r["source"] for r in runs_in_new_processes(TIERS, op, tmp_path / "cache")] == ["jit", "disk"]
