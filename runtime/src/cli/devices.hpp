// What info and status say of the visible devices: one line each (its GPU, the architecture whose binaries
// it takes, KILN_DEVICE_ARCH's override), the override itself, and the same in JSON; and the architectures
// precompile compiles for without --arch.
#pragma once

#include <kiln/error.hpp>
#include <kiln/registry.hpp>

#include "cli/output.hpp"

#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

// The devices a command reports on: every visible one (CUDA_VISIBLE_DEVICES applies), each through a
// registry of its own (so KILN_DEVICE_ARCH applies), or why there is none.
struct Devices {
  std::vector<DeviceInfo> list;  // by ordinal; empty without a driver or a GPU
  std::string why;               // why it is empty
};

// Device 0's line is asked of `first` (a registry of device 0): no driver or no GPU is an answer there,
// not a failure. The other devices, when device 0 is there, through `of_device(ordinal)`.
template <typename OfDevice>
Devices visible_devices(Registry& first, OfDevice&& of_device);

// "device 1: NVIDIA H100 80GB HBM3, sm_90, takes sm_80's binaries (KILN_DEVICE_ARCH), driver 13.0, 79.1 GiB"
std::string device_line(const DeviceInfo& d);
// "KILN_DEVICE_ARCH=1:80: device 1 takes sm_80's binaries", or empty where it is unset; said with or
// without a GPU, so that a test of a mixed server shows what it overrides.
std::string override_line();
// The object of one device: ordinal, name, arch (whose binaries it takes), gpu_arch, overridden, driver
// version, memory.
void json_device(Json& j, const DeviceInfo& d);
// The number of visible devices, once device 0 is known to be there.
int visible_count();

// What precompile compiles for without --arch: each architecture whose binaries a device takes
// (KILN_DEVICE_ARCH applied), once, in the order of the first device that takes it.
std::vector<unsigned> archs_taken(const std::vector<DeviceInfo>& devices);
// "compiling for every visible device's architecture: sm_90 (devices 0, 1), sm_80 (device 2, KILN_DEVICE_ARCH)"
std::string archs_taken_line(const std::vector<DeviceInfo>& devices);

template <typename OfDevice>
Devices visible_devices(Registry& first, OfDevice&& of_device) {
  Devices devices;
  try {
    devices.list.push_back(first.device());
  } catch (const Error& e) {
    if (e.code() != Errc::no_driver && e.code() != Errc::no_device) throw;
    devices.why = e.what();
    return devices;
  }
  for (int d = 1; d < visible_count(); ++d) devices.list.push_back(of_device(d).device());
  return devices;
}

}  // namespace kiln::cli
