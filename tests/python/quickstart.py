"""The README's Python quickstart, line for line (the readme suite checks the block against this file);
test_primitives.py runs it on a GPU and checks what it made."""

import cupy, numpy, kiln

scale = kiln.program(r'''
template <typename T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}''', name_expressions=["scale<float>"]).get("scale<float>")   # JIT once, then the disk cache
x = cupy.arange(1 << 20, dtype=cupy.float32)
scale((x.size + 255) // 256, 256, [x, numpy.float32(2), numpy.int32(x.size)])   # as cupy.RawKernel
prefix = kiln.exclusive_sum(cupy.arange(1 << 20, dtype=cupy.int32))  # CUB's scan: a new cupy array
largest = kiln.reduce(x, "a > b ? a : b", -numpy.inf)   # your operator, linked into CUB's reduce
