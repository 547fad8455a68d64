// Every kiln primitive (libkiln_prim): CUB's device-wide algorithms through kiln's registry.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/prim/common.hpp>
#include <kiln/prim/merge_sort.hpp>
#include <kiln/prim/operator.hpp>
#include <kiln/prim/radix_sort.hpp>
#include <kiln/prim/reduce.hpp>
#include <kiln/prim/scan.hpp>
#include <kiln/prim/search.hpp>
#include <kiln/prim/segmented_reduce.hpp>
#include <kiln/prim/segmented_sort.hpp>
#include <kiln/prim/select.hpp>
#include <kiln/prim/unique_by_key.hpp>
