// Temporary device storage for kiln's primitives: supplied by the caller (TempStorage) or owned by a plan
// (Workspace). Header-only, so a project's own plans (kiln/prim/scan_plan.cuh, …) need no libkiln_prim.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/driver.hpp>
#include <kiln/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace kiln::prim {

// Temporary storage supplied by the caller: at least the plan's temp_bytes(n).
struct TempStorage {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// Temporary storage a plan owns: grows to the largest size asked for, freed with the plan.
class Workspace {
 public:
  Workspace() = default;
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  Workspace(Workspace&& other) noexcept;
  Workspace& operator=(Workspace&& other) noexcept;

  // At least `bytes` of device memory; allocates only when it has to grow.
  TempStorage reserve(std::size_t bytes);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  CUcontext context_ = nullptr;   // the context current when it was allocated
  std::uint64_t context_id_ = 0;  // and its cuCtxGetId: after a reset the handle stays, the memory is gone
};

inline Workspace::~Workspace() {
  if (!data_) return;
  const Driver& d = driver();
  // The context may already be gone at process exit, or reset since (its memory went with it, and the
  // address may belong to a new allocation now): nothing is left to free then.
  unsigned long long id = 0;
  if (d.cuCtxGetId(context_, &id) != CUDA_SUCCESS || id != context_id_) return;
  if (d.cuCtxPushCurrent(context_) == CUDA_SUCCESS) {
    d.cuMemFree(reinterpret_cast<CUdeviceptr>(data_));
    CUcontext popped;
    d.cuCtxPopCurrent(&popped);
  }
}

inline Workspace::Workspace(Workspace&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      context_(std::exchange(other.context_, nullptr)),
      context_id_(std::exchange(other.context_id_, 0)) {}

inline Workspace& Workspace::operator=(Workspace&& other) noexcept {
  if (this != &other) {
    Workspace gone(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    context_ = std::exchange(other.context_, nullptr);
    context_id_ = std::exchange(other.context_id_, 0);
  }
  return *this;
}

inline TempStorage Workspace::reserve(std::size_t bytes) {
  const Driver& d = driver();
  unsigned long long current = 0;
  check(d.cuCtxGetId(nullptr, &current), "cuCtxGetId of the current context");
  if (data_ && current != context_id_) {
    // Allocated in a context that was reset since (or another one): that memory is gone with it.
    data_ = nullptr;
    bytes_ = 0;
  }
  if (bytes > bytes_ || !data_) {
    if (data_) {
      d.cuMemFree(reinterpret_cast<CUdeviceptr>(data_));
      data_ = nullptr;
      bytes_ = 0;
    }
    CUdeviceptr p = 0;
    check(d.cuMemAlloc(&p, bytes ? bytes : 1), "cuMemAlloc of " + std::to_string(bytes) + " bytes of temporary storage");
    check(d.cuCtxGetCurrent(&context_), "cuCtxGetCurrent");
    context_id_ = current;
    data_ = reinterpret_cast<void*>(p);
    bytes_ = bytes ? bytes : 1;
  }
  return {data_, bytes_};
}

}  // namespace kiln::prim
