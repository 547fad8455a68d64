// A program built against an installed kiln with pkg-config (README, "Installed, without Meson"): it
// gets a kernel from its own registry and launches it. Without a GPU it says so and exits 77.
#include <kiln/kiln.hpp>

#include "tiny_catalog.hpp"

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
  kiln::Registry registry(tiny::catalog(), 0, {.allow_ptx = true});  // PTX: also runs on GPUs newer than sm_90
  kiln::Kernel iota = registry.get("iota");
  const kiln::Driver& cu = kiln::driver();
  kiln::check(cu.cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
  int n = 1000;
  CUdeviceptr out;
  kiln::check(cu.cuMemAlloc(&out, n * sizeof(int)), "cuMemAlloc");
  kiln::launch(iota, {4}, {256}, 0, nullptr, out, n);
  std::vector<int> host(n);
  kiln::check(cu.cuMemcpyDtoH(host.data(), out, n * sizeof(int)), "cuMemcpyDtoH");
  for (int i = 0; i < n; ++i)
    if (host[i] != 3 * i) return std::printf("iota: wrong value at %d\n", i), 1;
  const std::string_view tier = kiln::to_string(iota.provenance.source);
  std::printf("iota: %d values right, from the %.*s tier\n", n, static_cast<int>(tier.size()), tier.data());
  return 0;
}
