// runtime/src/registry_slot.hpp — a registry's per-kernel slot, shared by the loader and the warm-up code.
#pragma once

#include <kiln/registry.hpp>

#include <atomic>

namespace kiln {

// Per kernel: the published, immutable Kernel. Written once under the unit's mutex, read without a lock.
struct Registry::Slot {
  std::atomic<const Kernel*> kernel{nullptr};
};

}  // namespace kiln
