// Launches an example kernel from a registry and checks the result.
#pragma once

#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>

#include "device_buffer.hpp"

#include <numeric>
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test {

// Whether this build embeds a binary for this GPU's arch. A build whose arch list leaves it out (the gpu
// suite runs one, scripts/gpu-check.sh) gets every kernel from the JIT tier, or from disk once compiled.
inline bool arch_embedded(unsigned arch) {
  const std::string archs = "," KILN_TEST_ARCHS ",";
  std::string needle = ",";  // appended piece by piece: GCC 12 warns (-Wrestrict) on "," + s + ","
  needle += std::to_string(arch);
  needle += ',';
  return archs.find(needle) != std::string::npos;
}

// The tier a kernel comes from, cold, in a build without a cubin for `arch`: the PTX tier when the build
// embeds PTX (for its newest arch) this GPU runs, else the JIT.
inline unsigned newest_arch() {
  unsigned newest = 0;
  std::stringstream list(KILN_TEST_ARCHS);
  for (std::string a; std::getline(list, a, ',');) newest = std::max(newest, static_cast<unsigned>(std::stoul(a)));
  return newest;
}
inline kiln::Tier cold_tier(unsigned arch) {
  return KILN_TEST_EMBED_PTX && newest_arch() <= arch ? kiln::Tier::ptx : kiln::Tier::jit;
}

// The architecture a kernel's code was compiled for, in a build without a cubin for `arch`: the embedded
// PTX's (its newest arch) when the PTX tier serves it, else `arch` (the JIT compiles for the device).
// Provenance::arch must say it: a primitive's plan picks CUB's launch policies by it.
inline unsigned cold_code_arch(unsigned arch) { return cold_tier(arch) == kiln::Tier::ptx ? newest_arch() : arch; }

// Sums 1M ones with block_sum_f32 from `registry`; true when the result is right.
inline bool block_sum_works(kiln::Registry& registry) {
  const kiln::Kernel k = registry.get("block_sum_f32");
  kiln::check(kiln::driver().cuCtxPushCurrent(registry.context()), "push");
  const int n = 1 << 20, blocks = 32;
  DeviceBuffer<float> in(std::vector<float>(n, 1.0f)), partial(blocks);
  kiln::launch(k, {blocks}, {256}, 0, nullptr, in.ptr(), partial.ptr(), n);
  const auto sums = partial.to_host();
  CUcontext ignored;
  kiln::driver().cuCtxPopCurrent(&ignored);
  return std::accumulate(sums.begin(), sums.end(), 0.0) == n;
}

}  // namespace kiln::test
