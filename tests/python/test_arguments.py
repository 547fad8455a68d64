"""Arguments from Python that kiln refuses before any driver call: each a kiln.Error (code invalid_argument)
that is also a ValueError or TypeError. No GPU is needed: the objects below only look like device arrays,
and their made-up pointers must never reach a driver."""

import os

import pytest

import kiln


class Interface:
    """An object whose __cuda_array_interface__ is whatever the test gives."""

    def __init__(self, **interface):
        self.__cuda_array_interface__ = interface


def array(shape=(16,), typestr="<i4", pointer=0x7F0000001000, **more):
    return Interface(shape=shape, typestr=typestr, data=(pointer, False), version=3, **more)


def refused(kind, call, *args, **kwargs):
    """The message of what call(*args) raises: a kiln.ArgumentError or ArgumentTypeError, also a `kind`."""
    with pytest.raises(kind) as caught:
        call(*args, **kwargs)
    error = caught.value
    assert isinstance(error, kiln.Error) and error.code == "invalid_argument", repr(error)
    expected = kiln.ArgumentTypeError if kind is TypeError else kiln.ArgumentError
    assert isinstance(error, expected), repr(error)
    return str(error)


def test_argument_errors_are_kiln_errors_and_builtin_ones():
    assert issubclass(kiln.ArgumentError, kiln.Error) and issubclass(kiln.ArgumentError, ValueError)
    assert issubclass(kiln.ArgumentTypeError, kiln.Error) and issubclass(kiln.ArgumentTypeError, TypeError)
    assert kiln.ArgumentError("x").code == "invalid_argument"
    assert kiln.primitives.ArgumentError is kiln.ArgumentError


@pytest.mark.parametrize("missing", ["shape", "typestr", "data"])
def test_an_interface_without_a_field_names_it(missing):
    interface = {"shape": (16,), "typestr": "<i4", "data": (0x7F0000001000, False), "version": 3}
    del interface[missing]
    message = refused(TypeError, kiln.exclusive_sum, Interface(**interface), array())
    assert f"has no '{missing}'" in message and "d_in" in message


def test_an_interface_that_is_not_a_dict_or_has_odd_fields_is_refused():
    class NotDict:
        __cuda_array_interface__ = [("shape", (16,))]

    assert "not a dict" in refused(TypeError, kiln.exclusive_sum, NotDict(), array())
    assert "typestr" in refused(TypeError, kiln.exclusive_sum, array(typestr=4), array())
    assert "(pointer, read_only)" in refused(TypeError, kiln.exclusive_sum, Interface(shape=(4,), typestr="<i4",
                                                                                      data=None), array())
    assert "strides" in refused(TypeError, kiln.exclusive_sum, array(strides="x"), array())


@pytest.mark.parametrize("shape, kind", [((-16,), ValueError), ((4.5,), TypeError), ((2**80,), ValueError),
                                         ((2**40, 2**40), ValueError), (16, TypeError), ((True,), TypeError)])
def test_a_shape_that_is_no_array_is_refused(shape, kind):
    message = refused(kind, kiln.exclusive_sum, array(shape=shape), array())
    assert "shape" in message


@pytest.mark.parametrize("pointer, kind", [(-1, ValueError), (2**70, ValueError), (2**64 - 8, ValueError),
                                           (1.5, TypeError), ("0x1000", TypeError)])
def test_a_pointer_that_is_no_address_is_refused(pointer, kind):
    message = refused(kind, kiln.exclusive_sum, array(pointer=pointer), array())
    assert ("pointer" if kind is ValueError else "(pointer, read_only)") in message


def test_a_plan_size_past_63_bits_is_refused():
    plan_sizes = kiln.primitives._count
    assert plan_sizes(5, "n", "exclusive_sum") == 5
    assert "fits 63 bits" in refused(ValueError, plan_sizes, 2**64, "n", "exclusive_sum")
    refused(ValueError, plan_sizes, -1, "n", "exclusive_sum")
    refused(TypeError, plan_sizes, 1.0, "n", "exclusive_sum")


@pytest.mark.parametrize("device, kind", [(-1, ValueError), (2**40, ValueError), ("0", TypeError), (True, TypeError)])
def test_a_device_that_is_no_ordinal_is_refused_everywhere(device, kind):
    assert "device" in refused(kind, kiln.examples_registry, device)
    assert "device" in refused(kind, kiln.primitives_registry, device)
    assert "device" in refused(kind, kiln.Program, 'extern "C" __global__ void k() {}', name_expressions=["k"],
                               device=device)
    assert "device" in refused(kind, kiln.program, 'extern "C" __global__ void k() {}', device=device)
    library = os.environ.get("KILN_TEST_CATALOG_LIBRARY", "/nonexistent.so")
    assert "device" in refused(kind, kiln.Registry.load, library, "kiln_examples", device)
    assert "device" in refused(kind, kiln._kiln._primitive, "exclusive_sum", "int32", device)


@pytest.mark.parametrize("args", [b"abc", bytearray(b"abc"), "abc", memoryview(b"abc")])
def test_kernel_arguments_as_bytes_or_text_are_refused(args):
    message = refused(TypeError, kiln._kiln._launch_layout, 1, 1, args)
    assert "args (" in message
    assert len(kiln._kiln._launch_layout(1, 1, [1, 2, 3])[2]) == 3  # a list of three ints is three arguments


def test_launch_argument_errors_are_kiln_errors():
    layout = kiln._kiln._launch_layout
    refused(ValueError, layout, 0, 1, [])
    refused(TypeError, layout, 1, 1, [object()])
    refused(ValueError, layout, 1, 1, [2**64])
    refused(ValueError, layout, 1, 1, [array(pointer=-1)])
