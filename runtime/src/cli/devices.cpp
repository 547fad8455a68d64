// The visible devices as info and status print them, and precompile compiles for them (cli/devices.hpp).
#include "cli/devices.hpp"

#include <kiln/driver.hpp>

#include "base/parse.hpp"     // forced_archs
#include "base/settings.hpp"  // KILN_DEVICE_ARCH

#include <algorithm>
#include <cstdlib>

namespace kiln::cli {

std::string device_line(const DeviceInfo& d) {
  std::string line = "device " + std::to_string(d.ordinal) + ": " + d.name + ", sm_" +
                     std::to_string(d.gpu_arch != 0 ? d.gpu_arch : d.arch);
  if (d.gpu_arch != 0 && d.arch != d.gpu_arch) line += ", takes sm_" + std::to_string(d.arch) + "'s binaries (KILN_DEVICE_ARCH)";
  return line + ", driver " + std::to_string(d.driver_version / 1000) + "." + std::to_string(d.driver_version % 1000 / 10) +
         ", " + fixed1(static_cast<double>(d.total_memory) / (1024.0 * 1024.0 * 1024.0)) + " GiB";
}

std::string override_line() {
  const std::string value = detail::setting("KILN_DEVICE_ARCH");
  if (value.empty()) return {};
  const auto parsed = detail::parse_forced_archs(value);
  if (!parsed) return std::string("KILN_DEVICE_ARCH=") + value + ": " + parsed.error() + "; ignored";
  const auto& forced = *parsed;
  std::string line = std::string("KILN_DEVICE_ARCH=") + value + ":";
  for (std::size_t i = 0; i < forced.size(); ++i)
    line += (i ? ", device " : " device ") + std::to_string(forced[i].first) + " takes sm_" +
            std::to_string(forced[i].second) + "'s binaries";
  return line;
}

void json_device(Json& j, const DeviceInfo& d) {
  j.object().field("ordinal", d.ordinal).field("name", d.name).field("arch", d.arch)
      .field("gpu_arch", d.gpu_arch != 0 ? d.gpu_arch : d.arch).field("overridden", d.gpu_arch != 0 && d.arch != d.gpu_arch)
      .field("driver_version", d.driver_version).field("total_memory", static_cast<std::uint64_t>(d.total_memory)).end();
}

std::vector<unsigned> archs_taken(const std::vector<DeviceInfo>& devices) {
  std::vector<unsigned> archs;
  for (const DeviceInfo& d : devices)
    if (std::find(archs.begin(), archs.end(), d.arch) == archs.end()) archs.push_back(d.arch);
  return archs;
}

std::string archs_taken_line(const std::vector<DeviceInfo>& devices) {
  std::string line = "compiling for every visible device's architecture:";
  const std::vector<unsigned> archs = archs_taken(devices);
  for (std::size_t i = 0; i < archs.size(); ++i) {
    std::string ordinals;
    std::size_t count = 0;
    bool overridden = false;
    for (const DeviceInfo& d : devices) {
      if (d.arch != archs[i]) continue;
      ordinals += (count++ ? ", " : "") + std::to_string(d.ordinal);
      overridden = overridden || (d.gpu_arch != 0 && d.arch != d.gpu_arch);
    }
    line += (i ? ", sm_" : " sm_") + std::to_string(archs[i]) + (count == 1 ? " (device " : " (devices ") + ordinals +
            (overridden ? ", KILN_DEVICE_ARCH)" : ")");
  }
  return line;
}

int visible_count() {
  int count = 0;
  check(driver().cuDeviceGetCount(&count), "kiln: cuDeviceGetCount");
  return count;
}

}  // namespace kiln::cli
