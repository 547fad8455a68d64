// A value with a tag, and the operator that keeps the one with the larger value: the consumer's own
// type and operator for kiln's open primitives (the kiln.reduce row max_by_a_tagged in geo.toml).
// Compiles under nvcc (host and device) and NVRTC (no standard headers).
#pragma once

namespace geo {

struct Tagged {
  float a;  // the value compared
  int b;    // what it came with (an index, say)
};

// max by field a; of two equal values the first (left) one, so the reduction is associative.
struct MaxByA {
  __host__ __device__ Tagged operator()(const Tagged& x, const Tagged& y) const { return y.a > x.a ? y : x; }
};

}  // namespace geo
