"""docs/python.md's structured dtype example, line for line (the readme suite checks the block against this
file); test_structs.py runs it on a GPU and checks what it made."""

import cupy, numpy, kiln

pair = numpy.dtype([("key", numpy.int32), ("w", numpy.float32)])   # struct T { int key; float w; }, 8 bytes
host = numpy.zeros(1 << 20, pair)
host["key"] = numpy.arange(host.size)
host["w"] = numpy.random.default_rng(0).standard_normal(host.size, dtype=numpy.float32)
items = cupy.asarray(host.view(numpy.uint8)).view(pair)            # a CuPy array of the structured dtype

heaviest = kiln.reduce(items, "b.w > a.w ? b : a", (-1, -numpy.inf))   # init: a tuple, or a numpy.void
kept, count = kiln.select_if(items, "x.w > 0.f")                       # kept[:int(count[0])], in order
doubled = kiln.transform(items, "T y = x; y.w *= 2.f; return y;")
kiln.merge_sort_pairs(items, cupy.arange(items.size, dtype=cupy.int32), op="a.w < b.w")   # by weight
