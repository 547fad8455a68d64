// The quickstart's program (README): plain g++ code that allocates device memory with the driver API,
// launches its registry's kernels through their typed handles and checks the result. Without a GPU it
// says so and exits 77.
#include <kiln/driver.hpp>  // kiln::driver(): the CUDA driver API kiln loads
#include <kiln/kiln.hpp>
#include "tiny_catalog.hpp"

#include <cstdio>
#include <string>
#include <vector>

int main() try {
  kiln::Registry registry(tiny::catalog());  // no CUDA call yet
  const kiln::Driver& cu = kiln::driver();   // libcuda's driver API, loaded by kiln: no nvcc, no cudart
  kiln::check(cu.cuCtxSetCurrent(registry.context()), "cuCtxSetCurrent");  // for cuMemAlloc
  const int n = 1000, blocks = (n + 255) / 256;
  CUdeviceptr out, best;
  kiln::check(cu.cuMemAlloc(&out, n * sizeof(int)), "cuMemAlloc");
  kiln::check(cu.cuMemAlloc(&best, blocks * sizeof(int)), "cuMemAlloc");

  // Typed handles: a misspelt name does not compile; launch takes the kernel's parameters as values.
  registry.get(tiny::kernels::fill_i32).launch({4}, {256}, 0, nullptr, out, -1, n);
  registry.get(tiny::kernels::iota).launch({4}, {256}, 0, nullptr, out, n);          // out[i] = 3 * i
  registry.get(tiny::kernels::scale_i32).launch({4}, {256}, 0, nullptr, out, 2, n);  // out[i] = 6 * i
  const auto block_max = registry.get(tiny::kernels::block_max);
  block_max.launch({blocks}, {256}, 0, nullptr, out, best, n);

  std::vector<int> host(n), maxima(blocks);  // the copies wait for the launches (the same stream)
  kiln::check(cu.cuMemcpyDtoH(host.data(), out, n * sizeof(int)), "cuMemcpyDtoH");
  kiln::check(cu.cuMemcpyDtoH(maxima.data(), best, blocks * sizeof(int)), "cuMemcpyDtoH");
  for (int i = 0; i < n; ++i)
    if (host[i] != 6 * i || maxima[i / 256] != 6 * (i / 256 == blocks - 1 ? n - 1 : i / 256 * 256 + 255))
      return std::printf("wrong value at %d\n", i), 1;
  std::printf("right, from the %s tier\n", std::string(kiln::to_string(block_max.provenance.source)).c_str());
  cu.cuMemFree(out), cu.cuMemFree(best);
  return 0;
} catch (const kiln::Error& e) {  // no driver or no GPU: nothing launched (77: skipped, for meson test)
  std::printf("%s\n", e.what());
  return e.code() == kiln::Errc::no_driver || e.code() == kiln::Errc::no_device ? 77 : 1;
}
