// Compiled (not linked, not run) by the installed-package test with only `pkg-config --cflags
// kiln_prim_headers`: the header-only plans and their device types are all an installed project needs to
// run kiln's open primitives on kiln.* rows of its own registry.
#include <kiln/prim/merge_sort_plan.cuh>
#include <kiln/prim/reduce_plan.cuh>
#include <kiln/prim/scan_plan.cuh>
#include <kiln/prim/segmented_reduce_plan.cuh>
#include <kiln/prim/select_plan.cuh>
#include <kiln/prim/transform_plan.cuh>
#include <kiln/prim/unique_by_key_plan.cuh>

#include <kiln_prim/iterators.cuh>

#include <cuda/functional>
#include <cuda/std/functional>

using Count = kiln_prim::counting_iterator<long long>;
template class kiln::prim::ExclusiveScan<long long, ::cuda::std::plus<>, Count>;
template class kiln::prim::Reduce<float, ::cuda::maximum<>>;
template class kiln::prim::MergeSort<float, int, ::cuda::std::greater<>>;
template class kiln::prim::SegmentedReduction<double, ::cuda::std::plus<>>;
template class kiln::prim::Unique<int, int, ::cuda::std::equal_to<>>;

struct Positive {
  __host__ __device__ bool operator()(float x) const { return x > 0; }
};
template class kiln::prim::SelectIf<float, Positive>;

struct Halve {
  __host__ __device__ double operator()(float x) const { return x * 0.5; }
};
template class kiln::prim::Transform<float, double, Halve>;
