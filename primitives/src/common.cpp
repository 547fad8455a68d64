// The primitives' registries (kiln's own table, kernels/primitives.toml), one per device, and the device a
// one-shot call runs on.
#include <kiln/error.hpp>
#include <kiln/prim/common.hpp>

#include "one_shot.hpp"
#include "primitives_catalog.hpp"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::prim {
namespace {

struct Registries {
  // Read without a lock on every call: a registry, once made, stays for the process's life (as the one
  // function-local static registry did), and so does its primary context.
  std::array<std::atomic<Registry*>, detail::kMaxDevices> by_device{};
  // Each registry's primary context once it is up: the current context (or a stream's) is told from these
  // by a pointer compare, without a driver call.
  std::array<std::atomic<CUcontext>, detail::kMaxDevices> contexts{};
  std::mutex making;
  std::array<std::unique_ptr<Registry>, detail::kMaxDevices> owned;
};

Registries& registries() {
  static Registries r;
  return r;
}

}  // namespace

Registry& registry(int device) {
  if (device < 0 || device >= detail::kMaxDevices) {
    throw Error(Errc::invalid_argument, "kiln::prim::registry: device " + std::to_string(device) +
                                            " is not an ordinal kiln's primitives serve (0 to " +
                                            std::to_string(detail::kMaxDevices - 1) + ")");
  }
  Registries& r = registries();
  if (Registry* made = r.by_device[device].load(std::memory_order_acquire)) return *made;
  std::lock_guard lock(r.making);
  if (!r.owned[device]) {
    r.owned[device] = std::make_unique<Registry>(kiln::prim::catalog(), device);  // no CUDA call yet
    r.by_device[device].store(r.owned[device].get(), std::memory_order_release);
  }
  return *r.owned[device];
}

Registry& registry() {
  if (!driver_available()) return registry(0);  // nothing to ask: device 0, as before any GPU is seen
  CUcontext current = nullptr;
  if (driver().cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr) return registry(0);
  const int device = detail::device_of_context(current);
  return registry(device < 0 ? 0 : device);
}

namespace detail {

int device_of_context(CUcontext context) {
  if (context == nullptr) return -1;
  Registries& r = registries();
  for (int device = 0; device < kMaxDevices; ++device) {
    const CUcontext known = r.contexts[device].load(std::memory_order_acquire);
    if (known == context) return device;
  }
  // Not a registry's primary context (yet): ask the driver, and remember the context when it is the
  // device's registry's, so that the next call is a pointer compare.
  const int device = context_device(context);
  if (device >= 0 && device < kMaxDevices) {
    try {
      if (registry(device).context() == context) r.contexts[device].store(context, std::memory_order_release);
    } catch (const Error&) {
      // The registry's device cannot come up: the call that uses it says why.
    }
  }
  return device;
}

int one_shot_device(CUstream stream) {
  CUcontext context = nullptr;
  // A null stream (or a destroyed one) with no context current: device 0's plan, whose context the call
  // makes current, as the CUDA runtime would (a destroyed stream's launch then says what is wrong).
  if (driver().cuStreamGetCtx(stream, &context) != CUDA_SUCCESS || context == nullptr) return 0;
  const int device = device_of_context(context);
  return device < 0 ? 0 : device;
}

}  // namespace detail
}  // namespace kiln::prim
