// What the multi_gpu suite's files share: the number of GPUs, and a registry's context made current.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>

namespace kiln::test {

inline int device_count() {
  int n = 0;
  kiln::check(kiln::driver().cuDeviceGetCount(&n), "cuDeviceGetCount");
  return n;
}

// The context current on this thread for a scope (the registry's, as a runtime-based caller would have it).
struct Current {
  explicit Current(kiln::Registry& r) { kiln::check(kiln::driver().cuCtxPushCurrent(r.context()), "push"); }
  ~Current() {
    CUcontext ignored = nullptr;
    kiln::driver().cuCtxPopCurrent(&ignored);
  }
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;
};

// The child process of the primitives' mixed-architecture case (multi_gpu_prim.cpp): 0 when it held.
int mixed_arch_primitives();

}  // namespace kiln::test
