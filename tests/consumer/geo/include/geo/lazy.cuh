// The consumer's own functions for kiln's lazy iterators (kiln_prim/iterators.cuh), its predicates and its
// order: what geo.toml's kiln.* rows sum_squares_f64, dot_f64, positive_f64, sort_desc_f32,
// segment_squares_f64, multiples_i64, products_f64 and argsort_desc_f32 name. Compiles
// under nvcc (host and device) and NVRTC (no standard headers).
#pragma once

#include <kiln_prim/iterators.cuh>

namespace geo {

// x² in double, of a float: the function of a transform_iterator.
struct Square {
  __host__ __device__ double operator()(float x) const { return double(x) * double(x); }
};

// x · y in double, of a zipped pair: a transform over a zip_iterator is a dot product's input.
struct Product {
  __host__ __device__ double operator()(const kiln_prim::pair<float, float>& p) const {
    return double(p.first) * double(p.second);
  }
};

// x > 0: the predicate of a select.
struct Positive {
  __host__ __device__ bool operator()(double x) const { return x > 0.0; }
};

// x is a multiple of `of`: a predicate with state, given to the plan at each call.
struct MultipleOf {
  long long of;
  __host__ __device__ bool operator()(long long x) const { return x % of == 0; }
};

// Descending order: a strict weak order on float whose first elements are the largest.
struct Descending {
  __host__ __device__ bool operator()(float a, float b) const { return a > b; }
};

}  // namespace geo
