// A program built against an installed kiln with pkg-config (README, "Installed, without Meson"): it
// gets its registry's kernels through their typed handles and launches them with values. Without a GPU
// it says so and exits 77.
#include <kiln/kiln.hpp>

#include "tiny_catalog.hpp"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

int main() {
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("no GPU, nothing launched: %s\n", e.what());
    return 77;
  }
  kiln::Registry registry(tiny::catalog());
  const auto iota = registry.get(tiny::kernels::iota);  // a typed handle: launch takes (int*, int)
  const auto fill = registry.get(tiny::kernels::fill_i32);
  const auto block_max = registry.get(tiny::kernels::block_max);
  const kiln::Driver& cu = kiln::driver();
  kiln::check(cu.cuCtxSetCurrent(registry.context()), "cuCtxSetCurrent");  // for cuMemAlloc below
  const int n = 1000, blocks = (n + 255) / 256;
  CUdeviceptr out, best;
  kiln::check(cu.cuMemAlloc(&out, n * sizeof(int)), "cuMemAlloc");
  kiln::check(cu.cuMemAlloc(&best, blocks * sizeof(int)), "cuMemAlloc");
  fill.launch({4}, {256}, 0, nullptr, out, -1, n);
  iota.launch({4}, {256}, 0, nullptr, out, n);
  block_max.launch({blocks}, {256}, 0, nullptr, out, best, n);
  std::vector<int> host(n), maxima(blocks);
  kiln::check(cu.cuMemcpyDtoH(host.data(), out, n * sizeof(int)), "cuMemcpyDtoH");
  kiln::check(cu.cuMemcpyDtoH(maxima.data(), best, blocks * sizeof(int)), "cuMemcpyDtoH");
  for (int i = 0; i < n; ++i)
    if (host[i] != 3 * i) return std::printf("iota: wrong value at %d\n", i), 1;
  for (int b = 0; b < blocks; ++b)
    if (maxima[b] != 3 * std::min(n - 1, 256 * b + 255)) return std::printf("block_max: wrong value at %d\n", b), 1;
  const std::string_view tier = kiln::to_string(iota.provenance.source);
  std::printf("iota, fill, block_max: right, from the %.*s tier\n", static_cast<int>(tier.size()), tier.data());
  return 0;
}
