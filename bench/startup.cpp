// Time from process start to the first result of the CUB example kernel (embedded tier),
// split into its phases; later first loads; a second get(); and the disk tier in a new process.
// Prints one Markdown table of medians.
//
// The parent spawns itself `runs` times; each child reads CLOCK_MONOTONIC (system-wide, so comparable
// with the parent's) at each phase and prints the offsets from the moment the parent called posix_spawn.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/select.hpp>

#include "bench_util.hpp"

#include "examples_catalog.hpp"
#include "fill_cache.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::now_ms;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

constexpr const char* kKernel = "block_sum_f32";
constexpr int kPhases = 8;
constexpr const char* kPhaseNames[kPhases] = {
    "spawn -> main()",
    "main() -> driver + primary context (cuInit, retain)",
    "get() from the embedded tier: first unit loaded in the context",
    "alloc + copy in + launch + copy out (1M floats)",
    "process start -> first result (total)",
    "get() from the embedded tier: another unit (vector_add)",
    "get() from the embedded tier: 2nd kernel of a loaded unit (scale_f64)",
    "second get() (in-memory tier), ns",
};

// Median over batches of the mean time of one get() of a loaded kernel, in nanoseconds.
double second_get_ns(kiln::Registry& registry) {
  std::vector<double> batches;
  for (int b = 0; b < 101; ++b) {
    constexpr int n = 10'000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      kiln::Kernel k = registry.get(kKernel);
      asm volatile("" : : "r"(k.function) : "memory");  // keep the call
    }
    batches.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  return median(batches);
}

int child(double spawned_ms) {
  const double t_main = now_ms();
  kiln::Registry registry(kiln::examples::catalog());
  registry.context();
  const double t_context = now_ms();
  const kiln::Kernel k = registry.get(kKernel);
  const double t_get = now_ms();

  const auto& d = kiln::driver();
  kiln::check(d.cuCtxPushCurrent(registry.context()), "cuCtxPushCurrent");
  const int n = 1 << 20, blocks = 64;
  std::vector<float> in(n, 1.0f), partial(blocks);
  CUdeviceptr din, dpartial;
  kiln::check(d.cuMemAlloc(&din, n * sizeof(float)), "cuMemAlloc");
  kiln::check(d.cuMemAlloc(&dpartial, blocks * sizeof(float)), "cuMemAlloc");
  kiln::check(d.cuMemcpyHtoD(din, in.data(), n * sizeof(float)), "cuMemcpyHtoD");
  kiln::launch(k, {blocks}, {256}, 0, nullptr, din, dpartial, n);
  kiln::check(d.cuMemcpyDtoH(partial.data(), dpartial, blocks * sizeof(float)), "cuMemcpyDtoH");
  const double t_result = now_ms();
  double sum = 0;
  for (float p : partial) sum += p;
  if (sum != n) {
    std::fprintf(stderr, "wrong result: %f\n", sum);
    return 1;
  }
  // Later first loads in the same context: what a program pays per kernel once CUDA is warm.
  const double t_other0 = now_ms();
  registry.get("vector_add");
  const double t_other1 = now_ms();
  registry.get("scale_f32");
  const double t_sibling0 = now_ms();
  registry.get("scale_f64");
  const double t_sibling1 = now_ms();
  const double get_ns = second_get_ns(registry);
  d.cuMemFree(din);
  d.cuMemFree(dpartial);
  CUcontext ignored;
  d.cuCtxPopCurrent(&ignored);
  std::printf("%.6f %.6f %.6f %.6f %.6f %.6f %.6f %.3f %u\n", t_main - spawned_ms, t_context - t_main,
              t_get - t_context, t_result - t_get, t_result - spawned_ms, t_other1 - t_other0, t_sibling1 - t_sibling0,
              get_ns, k.provenance.arch);
  return 0;
}

// `--disk-child SPAWNED DIR`: block_sum_f32 from the disk tier in a new process (context up first).
int disk_child(double spawned_ms, const char* dir) {
  const double t_main = now_ms();
  setenv("KILN_CACHE_DIR", dir, 1);
  kiln::Registry registry(kiln::examples::catalog(), 0, {.allow_ptx = false, .use_embedded = false});
  registry.context();
  const double t_context = now_ms();
  const kiln::Kernel k = registry.get(kKernel);
  const double t_get = now_ms();
  if (k.provenance.source != kiln::Tier::disk) return 1;
  std::printf("%.6f %.6f %.6f\n", t_main - spawned_ms, t_context - t_main, t_get - t_context);
  return 0;
}

// `--jit-child SPAWNED DIR`: block_sum_f32 cold through the JIT tier into an empty cache (unpacking the
// header bundle, starting a worker, NVRTC, stripping, nvJitLink, publishing, loading), then a second unit.
int jit_child(double spawned_ms, const char* dir) {
  const double t_main = now_ms();
  setenv("KILN_CACHE_DIR", dir, 1);
  kiln::Registry registry(kiln::examples::catalog(), 0, {.allow_ptx = false, .use_embedded = false});
  registry.context();
  const double t0 = now_ms();
  const kiln::Kernel k = registry.get(kKernel);
  const double t1 = now_ms();
  registry.get("scale_f32");
  const double t2 = now_ms();
  if (k.provenance.source != kiln::Tier::jit) return 1;
  std::printf("%.6f %.6f %.6f\n", t_main - spawned_ms, t1 - t0, t2 - t1);
  return 0;
}

// The CUB example's cubin for this device, as the embedded tier selects it.
const kiln::BinaryEntry& example_cubin(unsigned arch) {
  const kiln::Catalog& c = kiln::examples::catalog();
  const kiln::BinaryEntry* b = kiln::select_binary(c, c.units[c.find(kKernel)->unit], arch, false);
  if (b == nullptr) throw std::runtime_error("the build embeds no cubin for this GPU");
  return *b;
}

// The driver's part of a first load: `image` loaded as a library, block_sum_f32's kernel and its function
// in `context`; the library unloaded after the clock stops. Returns the milliseconds from `t0`.
double load_example(CUcontext context, const void* image, double t0) {
  const kiln::Catalog& c = kiln::examples::catalog();
  const std::string lowered(c.str(c.find(kKernel)->lowered));
  const auto& d = kiln::driver();
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  CUfunction function = nullptr;
  kiln::check(d.cuLibraryLoadData(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
  kiln::check(d.cuLibraryGetKernel(&kernel, library, lowered.c_str()), "cuLibraryGetKernel");
  kiln::check(d.cuCtxPushCurrent(context), "cuCtxPushCurrent");
  kiln::check(d.cuKernelGetFunction(&function, kernel), "cuKernelGetFunction");
  CUcontext ignored;
  d.cuCtxPopCurrent(&ignored);
  const double t1 = now_ms();
  d.cuLibraryUnload(library);
  return t1 - t0;
}

// `--raw-child SPAWNED`: the first load of block_sum_f32 from an uncompressed cubin: a raw cubin in memory
// handed to the driver, in a fresh process with its context up, as `--child` times get() (which reads the
// image out of its compressed fatbin first). The cubin is taken out before the clock starts.
int raw_child(double spawned_ms) {
  const double t_main = now_ms();
  kiln::Registry registry(kiln::examples::catalog());
  const CUcontext context = registry.context();
  const std::string cubin = kiln::examples::catalog().image(example_cubin(registry.device().arch));
  const double ms = load_example(context, cubin.data(), now_ms());
  std::printf("%.6f %.6f\n", t_main - spawned_ms, ms);
  return 0;
}

// `--single-child SPAWNED`: the first load of block_sum_f32 with the driver decompressing: the image kiln
// selected, copied with its compressed payload out of the unit's fatbin into a fatbin of its own (16-byte
// container header + the entry), handed to the driver, which can then run that image or nothing. Timed
// from the copy on, like `--raw-child`.
int single_child(double spawned_ms) {
  const double t_main = now_ms();
  kiln::Registry registry(kiln::examples::catalog());
  const CUcontext context = registry.context();
  const kiln::BinaryEntry& b = example_cubin(registry.device().arch);
  const double t0 = now_ms();
  const unsigned char* entry = kiln::examples::catalog().blobs + b.offset;
  std::uint32_t header_size;
  std::uint64_t padded;
  std::memcpy(&header_size, entry + 4, 4);
  std::memcpy(&padded, entry + 8, 8);
  const std::uint64_t images = header_size + padded;
  std::string fatbin(16 + images, '\0');
  const std::uint32_t magic = 0xBA55ED50;
  const std::uint16_t version = 1, container_header = 16;
  std::memcpy(fatbin.data(), &magic, 4);
  std::memcpy(fatbin.data() + 4, &version, 2);
  std::memcpy(fatbin.data() + 6, &container_header, 2);
  std::memcpy(fatbin.data() + 8, &images, 8);
  std::memcpy(fatbin.data() + 16, entry, images);
  const double ms = load_example(context, fatbin.data(), t0);
  std::printf("%.6f %.6f\n", t_main - spawned_ms, ms);
  return 0;
}

// `--unpack-child SPAWNED ARCH`: reading the CUB example's cubin out of its fatbin (header checks, zstd)
// alone, the first time in a process; no CUDA.
int unpack_child(double spawned_ms, unsigned arch) {
  const double t_main = now_ms();
  const kiln::BinaryEntry& b = example_cubin(arch);
  const double t0 = now_ms();
  const std::string cubin = kiln::examples::catalog().image(b);
  const double t1 = now_ms();
  if (cubin.size() != b.size) return 1;
  std::printf("%.6f %.6f\n", t_main - spawned_ms, t1 - t0);
  return 0;
}

// `--read-child SPAWNED DIR ARCH`: the cache read alone (probe + read + decompress + validate), no CUDA.
int read_child(double spawned_ms, const char* dir, unsigned arch) {
  const double t_main = now_ms();
  kiln::CacheConfig config;
  config.dir = dir;
  kiln::DiskCache cache(config);
  kiln::Registry registry(kiln::examples::catalog());
  const kiln::CacheKey key = registry.cache_key(kKernel, arch);
  const double t0 = now_ms();
  const auto entry = cache.load(key);
  const double t1 = now_ms();
  if (!entry) return 1;
  std::printf("%.6f %.6f\n", t_main - spawned_ms, t1 - t0);
  return 0;
}

void print_row(const char* name, std::vector<double> v, const char* unit) {
  std::printf("| %s | %.3f %s | %.3f %s | %.3f %s |\n", name, median(v), unit, *std::min_element(v.begin(), v.end()),
              unit, *std::max_element(v.begin(), v.end()), unit);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child(std::atof(argv[2]));
  if (argc == 4 && std::strcmp(argv[1], "--disk-child") == 0) return disk_child(std::atof(argv[2]), argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "--jit-child") == 0) return jit_child(std::atof(argv[2]), argv[3]);
  if (argc == 3 && std::strcmp(argv[1], "--raw-child") == 0) return raw_child(std::atof(argv[2]));
  if (argc == 3 && std::strcmp(argv[1], "--single-child") == 0) return single_child(std::atof(argv[2]));
  if (argc == 4 && std::strcmp(argv[1], "--unpack-child") == 0)
    return unpack_child(std::atof(argv[2]), static_cast<unsigned>(std::atoi(argv[3])));
  if (argc == 5 && std::strcmp(argv[1], "--read-child") == 0)
    return read_child(std::atof(argv[2]), argv[3], static_cast<unsigned>(std::atoi(argv[4])));
  const int runs = argc > 1 ? std::atoi(argv[1]) : 11;
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("startup benchmark skipped: %s\n", e.what());
    return 0;
  }
  try {
    const auto embedded = run_children(argv[0], {"--child"}, runs, kPhases);

    // The disk tier: a private cache directory filled with this device's cubins, as the JIT would leave it.
    const std::string dir = make_temp_dir("cache");
    kiln::CacheConfig config;
    config.dir = dir;
    std::uint64_t cubin_bytes = 0, entry_bytes = 0;
    unsigned arch = 0;
    std::string device_name;
    int driver_version = 0;
    {
      kiln::DiskCache cache(config);
      kiln::Registry registry(kiln::examples::catalog());
      const auto info = registry.device();
      arch = info.arch;
      device_name = info.name;
      driver_version = info.driver_version;
      kiln::test::fill_cache_from_embedded(registry, cache);
      for (const auto& unit : registry.catalog().units)
        if (const auto* b = kiln::select_binary(registry.catalog(), unit, arch, false)) cubin_bytes += b->size;
      entry_bytes = cache.stats().bytes;
    }
    const auto disk = run_children(argv[0], {"--disk-child", dir}, runs, 3);
    const auto raw = run_children(argv[0], {"--raw-child"}, runs, 2);
    const auto single = run_children(argv[0], {"--single-child"}, runs, 2);
    const auto unpack = run_children(argv[0], {"--unpack-child", std::to_string(arch)}, runs, 2);
    const auto read = run_children(argv[0], {"--read-child", dir, std::to_string(arch)}, runs, 2);
    remove_tree(dir);

    // The JIT tier: each run into an empty cache directory; then the JIT-built entries from disk.
    const int jit_runs = std::max(3, runs / 2);
    std::vector<std::vector<double>> jit(3);
    std::string jit_dir;
    for (int r = 0; r < jit_runs; ++r) {
      if (!jit_dir.empty()) remove_tree(jit_dir);
      jit_dir = make_temp_dir("jit");
      const auto one = run_children(argv[0], {"--jit-child", jit_dir}, 1, 3);
      for (int f = 0; f < 3; ++f) jit[f].push_back(one[f][0]);
    }
    const auto jit_disk = run_children(argv[0], {"--disk-child", jit_dir}, runs, 3);
    std::uint64_t jit_cubin_bytes = 0;
    {
      kiln::CacheConfig jit_config;
      jit_config.dir = jit_dir;
      kiln::DiskCache jit_cache(jit_config);
      kiln::Registry registry(kiln::examples::catalog());
      if (auto entry = jit_cache.load(registry.cache_key(kKernel, arch))) jit_cubin_bytes = entry->cubin.size();
    }
    remove_tree(jit_dir);
    std::uint64_t aot_cubin_bytes = 0;
    {
      const kiln::Catalog& c = kiln::examples::catalog();
      if (const auto* b = kiln::select_binary(c, c.units[c.find(kKernel)->unit], arch, false)) aot_cubin_bytes = b->size;
    }

    std::printf("kiln startup: %s (sm_%u), driver %d, %d fresh processes per row, kernel %s (CUB BlockReduce)\n\n",
                device_name.c_str(), arch, driver_version, runs, kKernel);
    std::printf("| phase | median | min | max |\n|---|---:|---:|---:|\n");
    for (int p = 0; p < kPhases; ++p) print_row(kPhaseNames[p], embedded[p], p == kPhases - 1 ? "ns" : "ms");
    // Beside phase 3 (get(): the image unpacked from its compressed fatbin, loaded, kernel, function).
    print_row("embedded, uncompressed: the raw cubin loaded (load + kernel + function), new process", raw[1], "ms");
    print_row("embedded: the selected image alone in a fatbin of its own, the driver decompressing (copy + load + kernel + function), new process",
              single[1], "ms");
    print_row("embedded: unpacking the cubin from its fatbin alone (checks + zstd), new process, no CUDA", unpack[1],
              "ms");
    print_row("disk: DiskCache::load alone (probe + read + decompress + validate), new process", read[1], "ms");
    print_row("disk: get() (probe + read + decompress + validate + load + function), new process", disk[2], "ms");
    print_row("disk: main() -> driver + primary context, same processes", disk[1], "ms");
    print_row("jit: cold get() into an empty cache (unpack headers, start worker, NVRTC, strip, nvJitLink, publish, load)",
              jit[1], "ms");
    print_row("jit: then a second unit (scale_f32) in the same process", jit[2], "ms");
    print_row("disk: get() of the JIT-built entry, new process", jit_disk[2], "ms");
    std::printf("\ndisk cache: %llu bytes of cubins in %llu bytes of entries (%.2fx)\n",
                static_cast<unsigned long long>(cubin_bytes), static_cast<unsigned long long>(entry_bytes),
                entry_bytes ? static_cast<double>(cubin_bytes) / static_cast<double>(entry_bytes) : 0.0);
    {
      const kiln::BinaryEntry& b = example_cubin(arch);
      std::printf("%s cubin embedded: %u bytes in its fatbin, %u unpacked\n", kKernel, b.stored_size, b.size);
    }
    std::printf("%s cubin: nvcc (embedded) %llu bytes, JIT (NVRTC, stripped PTX, nvJitLink) %llu bytes\n", kKernel,
                static_cast<unsigned long long>(aot_cubin_bytes), static_cast<unsigned long long>(jit_cubin_bytes));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_startup: %s\n", e.what());
    return 1;
  }
  return 0;
}
