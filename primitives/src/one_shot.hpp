// One-shot calls' plans: one per device, built on first use on that device's registry, and chosen by the
// device of the call's stream, so that each device runs the binary selected for its own architecture.
#pragma once

#include <kiln/prim/common.hpp>

#include <array>
#include <atomic>
#include <mutex>

namespace kiln::prim::detail {

// Devices kiln's primitives serve in one process (ordinals 0 to 63).
inline constexpr int kMaxDevices = 64;

// The device of `context`: a pointer compare against the registries' primary contexts, else the driver's
// answer; -1 when it cannot be told (primitives/src/common.cpp).
int device_of_context(CUcontext context);

// The device a one-shot call on `stream` runs on: the stream's context's (for a null stream, the current
// context's); device 0 when there is none (primitives/src/common.cpp).
int one_shot_device(CUstream stream);

template <typename Plan>
class OneShot {
 public:
  OneShot() = default;
  OneShot(const OneShot&) = delete;
  OneShot& operator=(const OneShot&) = delete;

  // The plan of `device`, built on first use (concurrent first calls build it once). Plans are never
  // destroyed: one-shot calls may come during static destruction, and a plan holds only its kernels.
  const Plan& plan(int device) {
    if (device < 0 || device >= kMaxDevices) (void)prim::registry(device);  // throws, naming the ordinal
    if (const Plan* made = plans_[device].load(std::memory_order_acquire)) return *made;
    std::lock_guard lock(making_);
    const Plan* made = plans_[device].load(std::memory_order_relaxed);
    if (made == nullptr) {
      made = new Plan(prim::registry(device));
      plans_[device].store(made, std::memory_order_release);
    }
    return *made;
  }

 private:
  std::array<std::atomic<const Plan*>, kMaxDevices> plans_{};
  std::mutex making_;
};

}  // namespace kiln::prim::detail
