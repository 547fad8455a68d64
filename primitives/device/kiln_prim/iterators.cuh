// Lazy input iterators for kiln's primitives: counting, constant, transform and zip. A kiln.reduce or
// kiln.*_scan row names one as its `In` parameter (docs/primitives.md, "Lazy iterators") and the plan reads the
// input through it, element by element, without the sequence ever being stored.
//
// CCCL 3.0.1 has no CUB counting, constant or transform iterator (cub::CountingInputIterator and its kin
// are gone, cuda::counting_iterator is not there yet), and thrust's live in an inline namespace named after
// the architecture list (THRUST_*_SM_*), so kernel names with them would differ between nvcc and NVRTC.
// These are what CUB's agents need of a non-pointer input iterator (random access, value-returning) and no
// more. Each is an aggregate of plain members: the host builds it, the kernel gets it by value, so its
// layout is the same for nvcc and NVRTC. Compiles under NVRTC (CUDA headers only).
#pragma once

#include <cuda/std/cstddef>
#include <cuda/std/iterator>
#include <cuda/std/type_traits>

namespace kiln_prim {

// A plan's input: In, or const T* where In is void (the rows' default).
template <typename T, typename In>
using input_iterator_t = ::cuda::std::conditional_t<::cuda::std::is_void_v<In>, const T*, In>;

// What CUB's agents ask of an input iterator's traits: random access, values (not references) read. Spelled
// in each iterator, not inherited, so that each stays an aggregate of its own members: counting_iterator<I>{0}.
#define KILN_PRIM_INPUT_ITERATOR(V)                                 \
  using iterator_category = ::cuda::std::random_access_iterator_tag; \
  using value_type = V;                                              \
  using difference_type = ::cuda::std::ptrdiff_t;                    \
  using pointer = void;                                              \
  using reference = V

// first, first + 1, …: e.g. counting_iterator<long long>{0} is the sequence 0, 1, 2, … (the indices a
// select compacts, kiln_prim/select.cuh).
template <typename I>
struct counting_iterator {
  KILN_PRIM_INPUT_ITERATOR(I);

  I value;

  __host__ __device__ __forceinline__ I operator*() const { return value; }
  __host__ __device__ __forceinline__ I operator[](difference_type n) const { return value + static_cast<I>(n); }
  __host__ __device__ __forceinline__ counting_iterator operator+(difference_type n) const {
    return {static_cast<I>(value + static_cast<I>(n))};
  }
  __host__ __device__ __forceinline__ counting_iterator operator-(difference_type n) const {
    return {static_cast<I>(value - static_cast<I>(n))};
  }
  __host__ __device__ __forceinline__ difference_type operator-(counting_iterator other) const {
    return static_cast<difference_type>(value) - static_cast<difference_type>(other.value);
  }
  __host__ __device__ __forceinline__ counting_iterator& operator+=(difference_type n) {
    value += static_cast<I>(n);
    return *this;
  }
  __host__ __device__ __forceinline__ counting_iterator& operator++() {
    ++value;
    return *this;
  }
};

// value, value, …: constant_iterator<float>{1.0f}. `index` only tells two iterators apart.
template <typename T>
struct constant_iterator {
  KILN_PRIM_INPUT_ITERATOR(T);

  T value;
  difference_type index = 0;

  __host__ __device__ __forceinline__ T operator*() const { return value; }
  __host__ __device__ __forceinline__ T operator[](difference_type) const { return value; }
  __host__ __device__ __forceinline__ constant_iterator operator+(difference_type n) const {
    return {value, index + n};
  }
  __host__ __device__ __forceinline__ constant_iterator operator-(difference_type n) const {
    return {value, index - n};
  }
  __host__ __device__ __forceinline__ difference_type operator-(constant_iterator other) const {
    return index - other.index;
  }
  __host__ __device__ __forceinline__ constant_iterator& operator+=(difference_type n) {
    index += n;
    return *this;
  }
  __host__ __device__ __forceinline__ constant_iterator& operator++() {
    ++index;
    return *this;
  }
};

// fn(base[0]), fn(base[1]), … as R: transform_iterator<double, Square, const double*>{d_in, {}}. Fn is any
// callable the row's header defines (or kiln_prim::linked_unary_op, an operator given at run time); base is
// any iterator here or a pointer.
template <typename R, typename Fn, typename Base>
struct transform_iterator {
  KILN_PRIM_INPUT_ITERATOR(R);

  Base base;
  Fn fn;

  __host__ __device__ __forceinline__ R operator*() const { return static_cast<R>(fn(*base)); }
  __host__ __device__ __forceinline__ R operator[](difference_type n) const { return static_cast<R>(fn(base[n])); }
  __host__ __device__ __forceinline__ transform_iterator operator+(difference_type n) const { return {base + n, fn}; }
  __host__ __device__ __forceinline__ transform_iterator operator-(difference_type n) const { return {base - n, fn}; }
  __host__ __device__ __forceinline__ difference_type operator-(const transform_iterator& other) const {
    return base - other.base;
  }
  __host__ __device__ __forceinline__ transform_iterator& operator+=(difference_type n) {
    base += n;
    return *this;
  }
  __host__ __device__ __forceinline__ transform_iterator& operator++() {
    ++base;
    return *this;
  }
};

// Two values read side by side: what a zip_iterator yields.
template <typename A, typename B>
struct pair {
  A first;
  B second;
};

// {a[0], b[0]}, {a[1], b[1]}, … as kiln_prim::pair: zip_iterator<const float*, const float*>{x, y}, usually the
// base of a transform_iterator whose function takes a pair (a dot product: reduce of x[i] * y[i]).
template <typename ItA, typename ItB>
struct zip_iterator {
  using pair_t = pair<typename ::cuda::std::iterator_traits<ItA>::value_type,
                      typename ::cuda::std::iterator_traits<ItB>::value_type>;
  KILN_PRIM_INPUT_ITERATOR(pair_t);

  ItA a;
  ItB b;

  __host__ __device__ __forceinline__ value_type operator*() const { return {*a, *b}; }
  __host__ __device__ __forceinline__ value_type operator[](difference_type n) const { return {a[n], b[n]}; }
  __host__ __device__ __forceinline__ zip_iterator operator+(difference_type n) const { return {a + n, b + n}; }
  __host__ __device__ __forceinline__ zip_iterator operator-(difference_type n) const { return {a - n, b - n}; }
  __host__ __device__ __forceinline__ difference_type operator-(const zip_iterator& other) const { return a - other.a; }
  __host__ __device__ __forceinline__ zip_iterator& operator+=(difference_type n) {
    a += n;
    b += n;
    return *this;
  }
  __host__ __device__ __forceinline__ zip_iterator& operator++() {
    ++a;
    ++b;
    return *this;
  }
};

}  // namespace kiln_prim

#undef KILN_PRIM_INPUT_ITERATOR
