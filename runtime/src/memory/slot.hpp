// A registry's per-kernel slot, shared by the loader and the warm-up code.
#pragma once

#include <kiln/registry.hpp>

#include <atomic>

namespace kiln {

// A kernel made launchable, and the context (its cuCtxGetId) its CUfunction belongs to. Immutable.
struct Registry::Loaded {
  Kernel kernel;
  std::uint64_t context_id = 0;  // never 0 for a live context
};

// Per kernel: the published Loaded. Written under the unit's mutex (once, and again after a context
// reset, the old one kept until the registry ends), read without a lock.
struct Registry::Slot {
  std::atomic<const Loaded*> loaded{nullptr};
};

}  // namespace kiln
