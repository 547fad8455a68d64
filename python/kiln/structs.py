"""NumPy structured dtypes as C++ structs, for operators over key/value items (kiln/operators.py).

A structured dtype becomes a struct whose fields have the C++ types of the dtype's fields, at NumPy's offsets:
an aligned dtype (numpy.dtype(..., align=True)) a struct of its alignment, any other a packed struct (NumPy's
alignment 1), with explicit padding where NumPy leaves bytes between fields. The declaration checks itself
against NumPy with static_asserts (the size, the alignment, each field's size and offset), so a layout kiln
renders wrongly is a compile error, never items read at the wrong bytes. Nested structured fields are structs
of their own; sub-arrays are C arrays. The declaration is part of the operator's text, so the operator's key
covers it. docs/python.md ("Structured dtypes") is the guide.
"""

import hashlib
import warnings

from ._kiln import ArgumentError, ArgumentTypeError

__all__ = ["CppStruct", "cpp_struct", "dtype_of_interface", "value_bytes"]

# NumPy's scalar kinds and sizes -> their C++ spelling under NVRTC (the device's sizes: long long is 8 bytes).
_SCALARS = {
    ("b", 1): "bool",
    ("i", 1): "signed char", ("i", 2): "short", ("i", 4): "int", ("i", 8): "long long",
    ("u", 1): "unsigned char", ("u", 2): "unsigned short", ("u", 4): "unsigned int", ("u", 8): "unsigned long long",
    ("f", 4): "float", ("f", 8): "double",
}
_MAPPED = "bool, int8-int64, uint8-uint64, float32, float64, nested structured dtypes and sub-arrays of them"

# C++20's keywords and the identifiers the declaration itself uses: a field may not be named so.
_CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
    compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
    default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
    int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
    reinterpret_cast requires return short signed sizeof static static_assert static_cast struct switch template
    this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
    while xor xor_eq T""".split())

# The offset of a field as a constant expression: NVRTC has no constant offsetof (libcu++'s is a cast), but
# its front end has __INTADDR__; other compilers take <cstddef>'s.
_OFFSET_OF = """#ifndef KILN_OFFSET_OF
#ifdef __CUDACC_RTC__
#define KILN_OFFSET_OF(S, f) __INTADDR__(&((S*)0)->f)
#else
#include <cstddef>
#define KILN_OFFSET_OF(S, f) offsetof(S, f)
#endif
#endif
"""


class CppStruct:
    """A structured dtype rendered: `name` (the struct's C++ name, from a digest of the layout), `declaration`
    (the struct and the ones it nests, each once per translation unit, with their checks, and `using T = name;`)
    and the dtype itself."""

    __slots__ = ("name", "declaration", "dtype")

    def __init__(self, name, declaration, dtype):
        self.name, self.declaration, self.dtype = name, declaration, dtype

    def __repr__(self):
        return f"<kiln struct {self.name} of {self.dtype}>"


_rendered = {}  # (dtype, aligned) -> CppStruct, for the process (NumPy's == ignores the alignment)


def cpp_struct(dtype, what="kiln: the dtype"):
    """The C++ struct of a NumPy structured dtype (a CppStruct); ArgumentTypeError, naming the field, for a
    dtype kiln cannot render. `what` begins its errors."""
    key = (dtype, dtype.isalignedstruct)
    made = _rendered.get(key)
    if made is None:
        if dtype.names is None:
            raise ArgumentTypeError(f"{what} ({dtype}) is not a structured dtype")
        parts = []
        name = _render(dtype, what, parts, set())
        declaration = _OFFSET_OF + "".join(parts) + f"using T = {name};\n"
        made = _rendered[key] = CppStruct(name, declaration, dtype)
    return made


def _render(dtype, what, parts, done):
    """Appends the declaration of `dtype`'s struct (after those of the structs it nests) to parts; its name."""
    name = "kiln_struct_" + hashlib.sha256(repr((str(dtype), dtype.isalignedstruct)).encode()).hexdigest()[:16]
    if name in done:
        return name
    fields = []  # (offset, C++ member's type, name, extents, size, alignment in the C++ layout)
    for field in dtype.names:
        fdtype, offset = dtype.fields[field][:2]
        fields.append((offset, *_member(field, fdtype, f"{what}'s field '{field}'", parts, done)))
    fields.sort(key=lambda f: f[0])
    for (o1, _, n1, _, s1, _), (o2, _, n2, _, _, _) in zip(fields, fields[1:]):
        if o1 + s1 > o2:
            raise ArgumentTypeError(f"{what}'s fields '{n1}' and '{n2}' overlap; a struct's fields cannot")
    aligned = dtype.isalignedstruct
    lines, at, pads = [], 0, 0
    for offset, ctype, field, extents, size, alignment in fields:
        natural = -(-at // alignment) * alignment if aligned else at
        if offset < natural:
            raise ArgumentTypeError(f"{what}'s field '{field}' is at offset {offset}, not aligned for its "
                                    f"{alignment}-byte type in an aligned struct")
        if offset > natural:
            lines.append(f"  unsigned char kiln_pad_{pads}[{offset - at}];")
            pads += 1
        lines.append(f"  {ctype} {field}{''.join(f'[{e}]' for e in extents)};")
        at = offset + size
    if dtype.itemsize > at:
        lines.append(f"  unsigned char kiln_pad_{pads}[{dtype.itemsize - at}];")
    head = f"struct alignas({dtype.alignment}) {name}" if aligned else f"struct __attribute__((packed)) {name}"
    checks = [f"static_assert(sizeof({name}) == {dtype.itemsize}, \"kiln: NumPy's itemsize of {name}\");",
              f"static_assert(alignof({name}) == {dtype.alignment}, \"kiln: NumPy's alignment of {name}\");"]
    for offset, _, field, _, size, _ in fields:
        checks.append(f"static_assert(sizeof({name}::{field}) == {size} && KILN_OFFSET_OF({name}, {field}) == "
                      f"{offset}, \"kiln: field '{field}' of {name} as NumPy lays it out\");")
    shown = str(dtype)  # a title may hold any text: the comment shows plain text only
    shown = shown if shown.isascii() and shown.isprintable() and "\\" not in shown else f"{len(fields)} fields"
    parts.append(f"// NumPy's {shown}\n#ifndef KILN_{name}\n#define KILN_{name}\n{head} {{\n" + "\n".join(lines) +
                 "\n};\n" + "\n".join(checks) + "\n#endif\n")
    done.add(name)
    return name


def _member(field, fdtype, what, parts, done):
    """A field's C++ member: (type, name, extents, size in bytes, alignment in the C++ layout)."""
    if not field.isidentifier() or not field.isascii() or field in _CPP_KEYWORDS or field.startswith("kiln_"):
        raise ArgumentTypeError(f"{what} is not a name a C++ struct can have (an identifier, not a C++ "
                                "keyword, T or kiln_...); rename it (numpy.dtype(...).names)")
    extents = ()
    if fdtype.subdtype is not None:
        fdtype, extents = fdtype.subdtype
    count = 1
    for extent in extents:
        count *= extent
    if fdtype.names is not None:
        ctype = _render(fdtype, what, parts, done)
        alignment = fdtype.alignment
    else:
        if fdtype.byteorder == ">":
            raise ArgumentTypeError(f"{what} is big-endian ({fdtype.str}); the GPU reads little-endian "
                                    "numbers (dtype.newbyteorder('<'))")
        ctype = _SCALARS.get((fdtype.kind, fdtype.itemsize))
        if ctype is None:
            raise ArgumentTypeError(f"{what} is {fdtype}, which kiln does not map to C++; it maps {_MAPPED}")
        alignment = fdtype.itemsize
    if count == 0:
        raise ArgumentTypeError(f"{what} is an empty sub-array; C++ has no arrays of 0 items")
    return ctype, field, extents, fdtype.itemsize * count, alignment


def dtype_of_interface(typestr, descr, what):
    """The structured dtype that a __cuda_array_interface__ describes with typestr '|V<n>' and its descr (as
    Numba's record arrays do), or None when descr names no fields. Unnamed entries of descr are padding."""
    if type(descr) is not list or not descr or all(type(e) is tuple and e[:1] == ("",) for e in descr):
        return None
    import numpy  # the interface's producer holds structured arrays, so NumPy is there

    names, formats, offsets, at = [], [], [], 0
    try:
        for entry in descr:
            item = numpy.dtype(entry[1] if len(entry) == 2 else (entry[1], entry[2]))
            if entry[0]:
                names.append(entry[0])
                formats.append(item)
                offsets.append(at)
            at += item.itemsize
        dtype = numpy.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": at})
    except (TypeError, ValueError, IndexError) as e:
        raise ArgumentTypeError(f"{what}: its __cuda_array_interface__ has a descr NumPy cannot read ({e})") \
            from None
    if dtype.itemsize != int(typestr[2:]):
        raise ArgumentError(f"{what}: its __cuda_array_interface__ has a descr of {dtype.itemsize} bytes and "
                            f"a typestr {typestr}")
    return dtype


def value_bytes(value, dtype, what):
    """One item of a structured dtype as its bytes: a numpy.void or a one-item array of that dtype, or a tuple
    of its fields' values (as numpy.array(value, dtype) takes it)."""
    import numpy  # a structured dtype came from NumPy

    got = getattr(value, "dtype", None)
    if got is not None:
        if got != dtype:
            raise ArgumentTypeError(f"{what} is of dtype {got}, not {dtype}")
        if getattr(value, "size", 1) != 1:
            raise ArgumentError(f"{what} has {value.size} items; one is taken")
        return numpy.asarray(value).tobytes()
    if type(value) is not tuple:
        raise ArgumentTypeError(f"{what} must be one {dtype} value (a numpy.void, a one-item array or a tuple "
                                f"of its fields), not {value!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # NumPy 1.x's warning for an int out of range
            return numpy.array(value, dtype).tobytes()
    except (TypeError, ValueError, OverflowError, DeprecationWarning) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ArgumentError(f"{what} {value!r} is not one {dtype} value: {reason}") from None
