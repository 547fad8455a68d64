// Operators linked in at run time (kiln::prim::Operator, kiln/prim/operator.hpp): the function a linked
// unit's kernels call, and the check the operator's translation unit makes. No includes: the operator's
// translation unit compiles this header alone, in milliseconds (docs/DESIGN.md, "Operators at run time").
#pragma once

namespace kiln_prim {

// The items of a 16-byte struct as the linked *_b16 rows carry them (kiln::prim::Bytes16 on the host): its
// bytes, aligned to 16. The rows touch an item only through the operator, which sees the struct.
struct alignas(16) bytes16 {
  unsigned long long word[2];
};

// Defined by the translation unit kiln compiles from the caller's operator and links into the unit
// (nvJitLink, LTO): R(Args...), under a C++ name that encodes R and the arguments' types, so an operator
// built for other types cannot be linked in by mistake.
template <typename R, typename... Args>
__device__ R linked_operator(Args... args);

// The binary operator of a linked kiln.reduce / kiln.*_scan row: CUB calls it, it calls the linked function.
template <typename T>
struct linked_binary_op {
  __device__ __forceinline__ T operator()(const T& a, const T& b) const { return linked_operator<T, T, T>(a, b); }
};

// The comparator of a linked kiln.merge_sort_pairs row: a strict weak order on K, bool(K, K).
template <typename K>
struct linked_compare_op {
  __device__ __forceinline__ bool operator()(const K& a, const K& b) const { return linked_operator<bool, K, K>(a, b); }
};

// A unary operator linked in: R(A), e.g. the function of a transform_iterator (kiln_prim/iterators.cuh).
template <typename R, typename A>
struct linked_unary_op {
  __device__ __forceinline__ R operator()(const A& a) const { return linked_operator<R, A>(a); }
};

namespace detail {

template <typename A, typename B>
struct same {
  static constexpr bool value = false;
};
template <typename A>
struct same<A, A> {
  static constexpr bool value = true;
};

// A parameter's type without const and reference: float(const float&, const float&) is float(float, float).
template <typename T> struct bare { using type = T; };
template <typename T> struct bare<const T> { using type = T; };
template <typename T> struct bare<T&> : bare<T> {};
template <typename T> struct bare<T&&> : bare<T> {};

template <typename F>
struct signature_of;
template <typename R, typename... A>
struct signature_of<R (*)(A...)> {
  using type = R(typename bare<A>::type...);
};

// Instantiated by the operator's translation unit: a compile error naming both types (Expected and
// Given, in the "detected during instantiation" line of NVRTC's log) when they differ.
template <typename Expected, typename Given>
struct check_operator_signature {
  static_assert(same<Expected, Given>::value,
                "kiln: the operator's signature is not the one the primitive calls (Expected and Given below)");
  static constexpr bool ok = true;
};

}  // namespace detail
}  // namespace kiln_prim
