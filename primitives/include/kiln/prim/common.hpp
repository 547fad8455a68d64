// What every kiln primitive shares: the registry its kernels come from, and
// temporary device storage (supplied by the caller, or owned by a plan).
//
// A plan (ExclusiveSum<T>, RadixSortPairs<K>, …) resolves its kernels once, when it is built, and is then
// called any number of times on any stream. Given enough temporary storage it never allocates. A plan is
// not thread-safe; use one per thread or stream. One-shot functions (kiln::prim::exclusive_sum, …) build
// nothing: they use a process-wide plan per device, the one of the device their stream belongs to (or,
// for the null stream, the current context's), and stream-ordered temporary storage (cuMemAllocAsync).
// A plan runs on its registry's device only: a stream of another device is kiln::Error(invalid_argument).
// Every call reports a failed launch as kiln::Error.
//
// Pointers are device pointers. Item counts are limited to 2^32 - 1 (CUB's 32-bit offsets, as in
// cub::Device* called with int counts); larger counts throw kiln::Error (invalid_argument).
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/catalog.hpp>  // catalog(): the primitives' kernels and units, read by their users
#include <kiln/prim/detail/plan.hpp>
#include <kiln/prim/storage.hpp>
#include <kiln/registry.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::prim {

// The registry of kiln's primitives on `device`, created on first use with the default options (embedded,
// then the default disk cache, then JIT): one per device, for the process's life. Pass your own Registry
// to a plan to choose the tiers. Throws kiln::Error(invalid_argument) for an ordinal below 0 or above 63.
Registry& registry(int device);

// The registry of the current context's device (device 0 on a thread with no current context): what a
// plan built without a registry uses. A primary context is told from the registries' own by a pointer
// compare; another context costs a few driver calls.
Registry& registry();

// The primitives' catalog, for a Registry of your own (generated from kernels/primitives.toml).
const Catalog& catalog();

}  // namespace kiln::prim
