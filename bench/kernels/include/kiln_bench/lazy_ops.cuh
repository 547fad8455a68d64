// The functions bench/kernels/lazy_units.toml's rows name, and that bench_prim's cub::Device* side is
// called with: the same functor types, compiled by nvcc on both sides. Compiles under NVRTC too.
#pragma once

#include <kiln_prim/iterators.cuh>

namespace kiln_bench {

// x² in double, of a float: a transform_iterator's function.
struct SquareF {
  __host__ __device__ double operator()(float x) const { return double(x) * double(x); }
};

// x · y in double, of a zipped pair.
struct ProductF {
  __host__ __device__ double operator()(const kiln_prim::pair<float, float>& p) const {
    return double(p.first) * double(p.second);
  }
};

// x is a multiple of 3.
struct ThirdL {
  __host__ __device__ bool operator()(long long x) const { return x % 3 == 0; }
};

}  // namespace kiln_bench
