// The primitives' registry, owned temporary storage and context scope.
#include <kiln/prim/common.hpp>

#include "primitives_catalog.hpp"

#include <kiln/error.hpp>

#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace kiln::prim {

Registry& registry() {
  static Registry instance(kiln::prim::catalog());
  return instance;
}

Workspace::~Workspace() {
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

Workspace::Workspace(Workspace&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      context_(std::exchange(other.context_, nullptr)),
      context_id_(std::exchange(other.context_id_, 0)) {}

Workspace& Workspace::operator=(Workspace&& other) noexcept {
  if (this != &other) {
    Workspace gone(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    context_ = std::exchange(other.context_, nullptr);
    context_id_ = std::exchange(other.context_id_, 0);
  }
  return *this;
}

TempStorage Workspace::reserve(std::size_t bytes) {
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

namespace detail {

ContextScope::ContextScope(Registry& registry) {
  check(driver().cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
}

ContextScope::~ContextScope() {
  CUcontext popped;
  driver().cuCtxPopCurrent(&popped);
}

CUdevice device_of(Registry& registry) {
  CUdevice device = 0;
  check(driver().cuDeviceGet(&device, registry.device().ordinal), "cuDeviceGet");
  return device;
}

std::uint32_t checked_count(std::size_t n, const char* primitive) {
  if (n > std::numeric_limits<std::uint32_t>::max()) {
    throw std::length_error(std::string("kiln::prim::") + primitive + ": " + std::to_string(n) +
                            " items is more than the 2^32 - 1 this primitive supports");
  }
  return static_cast<std::uint32_t>(n);
}

void check_temp(TempStorage temp, std::size_t needed, const char* primitive) {
  if (needed > 0 && (temp.data == nullptr || temp.bytes < needed)) {
    throw std::invalid_argument(std::string("kiln::prim::") + primitive + ": temporary storage of " +
                                std::to_string(temp.bytes) + " bytes given, " + std::to_string(needed) +
                                " needed (ask the plan's temp_bytes(n))");
  }
}

}  // namespace detail
}  // namespace kiln::prim
