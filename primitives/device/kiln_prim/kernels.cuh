// Every kernel header of kiln's primitives. Each primitive unit includes this one
// header first, so that all of them have the same leading #include and share one NVRTC precompiled header.
#pragma once

#include <kiln_prim/cub_nvrtc.cuh>

#include <kiln_prim/scan.cuh>
#include <kiln_prim/reduce.cuh>
#include <kiln_prim/merge_sort.cuh>
#include <kiln_prim/unique_by_key.cuh>
#include <kiln_prim/segmented_sort.cuh>
#include <kiln_prim/radix_sort.cuh>
#include <kiln_prim/select.cuh>
#include <kiln_prim/search.cuh>
