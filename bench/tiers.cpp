// Time to a launchable kernel in each tier, for three kernels: a trivial one
// (vector_add), the CUB example (block_sum_f32) and a generated one of ~2,000 lines (synthetic_2000 of
// the big registry). Each tier in fresh processes: embedded, disk (nvcc's cubins put in a cache
// directory), PTX (the embedded PTX assembled, when the build embeds PTX for this GPU), JIT cold (empty
// cache directory), and the in-memory get() after them. Context creation (cuInit + retaining the
// primary context) is done and timed before the tier's own time starts, and is reported apart.
//
// `--export FILE` also writes, for each kernel, what the JIT tier hands NVRTC (the translation unit,
// options, name expression, and the headers, written under a directory of their own for CuPy to read)
// as JSON, so that cupy_tiers.py can time CuPy on the same source. Needs a GPU.
//
// `--json FILE` writes the medians (ms; in-memory in ns) for suite.py's kiln/CuPy ratios.
//
// A second table splits a cold JIT get() into its steps, every one measured in the same fresh processes
// (an empty directory each): making the request alone (the headers out of the catalog, in memory), then
// a real cold get() with the pool's trace on: the compile on the worker pool (queued to answered, and the
// NVRTC and nvJitLink times the worker reports), and the get() less that compile, taken within each
// process (its own request, publishing, loading); then the same compile in a new process whose cache
// holds the family's PCH file (built by an earlier one): what a second process's first unit of a family
// costs.
//
// A third table times the driver alone: the first library loaded in a fresh context (cuLibraryLoadData,
// cuLibraryGetKernel, cuKernelGetFunction), for nvcc's own cubin of the CUB example (compiled here, with
// the toolkit's nvcc, from the translation unit the catalog carries) and for the lean one the build
// embeds (the same PTX without its unreferenced globals, docs/DESIGN.md "Lean cubins").
//
//   bench_tiers [--runs N] [--export FILE] [--json FILE]
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/driver.hpp>
#include <kiln/kiln.hpp>
#include <kiln/select.hpp>

#include "big_catalog.hpp"
#include "bench_util.hpp"
#include "examples_catalog.hpp"
#include "fill_cache.hpp"
#include "jit/jit_pool.hpp"
#include "jit/request.hpp"
#include "jit/pool/pool.hpp"

#include <cstring>
#include <filesystem>
#include <future>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using kiln::bench::make_temp_dir;
using kiln::bench::median;
using kiln::bench::now_ms;
using kiln::bench::remove_tree;
using kiln::bench::run_children;

struct Subject {
  const char* label;
  const char* registry;  // "examples" or "big"
  const char* kernel;
};

constexpr Subject kSubjects[] = {
    {"trivial (vector_add)", "examples", "vector_add"},
    {"CUB example (block_sum_f32)", "examples", "block_sum_f32"},
    {"generated, ~2,000 lines (synthetic_2000)", "big", "synthetic_2000"},
};

const kiln::Catalog& catalog_of(const std::string& registry) {
  return registry == "big" ? kiln::big::catalog() : kiln::examples::catalog();
}

// A number field of the pool's trace line (jit/pool/trace.hpp); -1 when absent.
double trace_field(const std::string& line, const std::string& name) {
  const std::size_t at = line.find("\"" + name + "\":");
  return at == std::string::npos ? -1 : std::strtod(line.c_str() + at + name.size() + 3, nullptr);
}

// The pool's trace line of `unit` ("REGISTRY/UNIT") in the file at `path`; empty when there is none.
std::string trace_line(const std::string& path, const std::string& unit) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.find("\"event\":\"request\"") != std::string::npos && line.find("\"unit\":\"" + unit + "\"") != std::string::npos)
      return line;
  return {};
}

// `--child SPAWNED phases|pch-build|pch-warm REGISTRY KERNEL DIR`: the steps of a cold JIT get() (cache
// directory DIR; the context made first).
// phases: one process, every figure from it. It makes the unit's request alone first (ms), then runs a
// real cold get() with the pool's trace on (KILN_JIT_TRACE), and prints the request (ms), the get()
// (ms), the compile on the pool as the trace has it (queued to answered, ms), the NVRTC and nvJitLink
// times the worker reports (ms).
// pch-warm: the request and jit_compile, where pch-build left the family's PCH file: the request (ms),
// the compile's wall time (ms), NVRTC (ms), nvJitLink (ms).
int phases_child(const std::string& mode, const std::string& registry_name, const std::string& kernel,
                 const char* dir) {
  setenv("KILN_CACHE_DIR", dir, 1);
  if (mode == "pch-build") setenv("KILN_JIT_WORKERS", "1", 1);  // before anything makes the pool
  const std::string trace = std::string(dir) + "/trace.jsonl";
  if (mode == "phases") setenv("KILN_JIT_TRACE", trace.c_str(), 1);  // before anything makes the pool
  const kiln::Catalog& catalog = catalog_of(registry_name);
  kiln::RegistryOptions options;
  options.use_embedded = false;
  options.use_jit = true;
  kiln::Registry registry(catalog, 0, options);
  registry.context();
  const unsigned arch = registry.device().arch;
  const kiln::KernelEntry* entry = catalog.find(kernel);
  kiln::DiskCache& cache = kiln::default_cache();
  if (mode == "phases") {
    const double t0 = now_ms();
    const kiln::detail::CompileRequest request = kiln::detail::make_request(catalog, entry->unit, arch);
    const double t1 = now_ms();
    const kiln::Kernel k = registry.get(kernel);
    const double t2 = now_ms();
    if (k.provenance.tier != kiln::Tier::jit) {
      std::fprintf(stderr, "bench_tiers: the cold get() of %s was not served by the JIT\n", kernel.c_str());
      return 1;
    }
    const std::string line = trace_line(trace, request.registry + "/" + request.unit);
    if (line.empty()) {
      std::fprintf(stderr, "bench_tiers: the pool's trace has no request for %s\n", request.unit.c_str());
      return 1;
    }
    std::printf("%.6f %.6f %.6f %.6f %.6f\n", t1 - t0, t2 - t1, trace_field(line, "end") - trace_field(line, "queued"),
                trace_field(line, "nvrtc"), trace_field(line, "link"));
    return 0;
  }
  if (mode == "pch-build") {
    // A first process builds the family's PCH: the pool builds one only for a family with more requests
    // than free workers (docs/DESIGN.md, "PCH across processes"), so the unit twice at once on one worker.
    auto request = kiln::detail::make_request(catalog, entry->unit, arch);
    const auto family = kiln::detail::request_family(request, catalog.header_bundle_digest, cache);
    if (family.key.empty()) return 1;  // it includes nothing: no PCH
    auto first = std::async(std::launch::async, [&] { return kiln::detail::jit_compile(request, family); });
    auto second = std::async(std::launch::async, [&] { return kiln::detail::jit_compile(request, family); });
    const bool compiled = first.get().entry.ok() && second.get().entry.ok();
    const bool built = compiled && kiln::detail::jit_pool_stats().pch_created > 0;
    std::printf("%d\n", built ? 1 : 0);
    return built ? 0 : 1;
  }
  const double t0 = now_ms();
  kiln::detail::CompileRequest request = kiln::detail::make_request(catalog, entry->unit, arch);
  const auto family = kiln::detail::request_family(request, catalog.header_bundle_digest, cache);
  const double t1 = now_ms();
  const kiln::detail::CompileOutcome outcome = kiln::detail::jit_compile(request, family);
  const double t2 = now_ms();
  if (!outcome.entry) {
    std::fprintf(stderr, "%s\n%s\n", outcome.entry.error().c_str(), outcome.log.c_str());
    return 1;
  }
  if (mode == "pch-warm" && outcome.pch != kiln::detail::PchResult::used) {
    std::fprintf(stderr, "bench_tiers: the PCH file was not used: %s\n", outcome.log.c_str());
    return 1;
  }
  std::printf("%.6f %.6f %.6f %.6f\n", t1 - t0, t2 - t1, outcome.nvrtc_ms, outcome.link_ms);
  return 0;
}

// `--child SPAWNED TIER REGISTRY KERNEL DIR`: prints main -> context (ms), the get() that makes the
// kernel launchable (ms), and then a second get() (ns, median of batches).
// `--child SPAWNED raw FILE LOWERED -`: the context made current, then the ms of loading the cubin in FILE
// and resolving its kernel LOWERED, with the driver's calls alone.
int raw_child(const std::string& file, const std::string& lowered) {
  const kiln::Driver& cu = kiln::driver();
  std::ifstream in(file, std::ios::binary);
  const std::string cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUdevice device = 0;
  CUcontext context = nullptr;
  if (cu.cuInit(0) != CUDA_SUCCESS || cu.cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      cu.cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS || cu.cuCtxPushCurrent(context) != CUDA_SUCCESS)
    return 1;
  const double t0 = now_ms();
  CUlibrary library = nullptr;
  CUkernel kernel = nullptr;
  CUfunction function = nullptr;
  if (cu.cuLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != CUDA_SUCCESS ||
      cu.cuLibraryGetKernel(&kernel, library, lowered.c_str()) != CUDA_SUCCESS ||
      cu.cuKernelGetFunction(&function, kernel) != CUDA_SUCCESS)
    return 1;
  std::printf("%.6f\n", now_ms() - t0);
  return 0;
}

int child(const std::string& tier, const std::string& registry_name, const std::string& kernel, const char* dir) {
  if (tier == "phases" || tier.rfind("pch-", 0) == 0) return phases_child(tier, registry_name, kernel, dir);
  if (tier == "raw") return raw_child(registry_name, kernel);
  const double t_main = now_ms();
  if (tier != "embedded") setenv("KILN_CACHE_DIR", dir, 1);
  kiln::RegistryOptions options;
  options.use_embedded = tier == "embedded";
  options.allow_ptx = tier == "ptx";
  options.use_jit = tier == "jit";
  kiln::Registry registry(catalog_of(registry_name), 0, options);
  registry.context();
  const double t_context = now_ms();
  const kiln::Kernel k = registry.get(kernel);
  const double t_get = now_ms();
  const kiln::Tier expected = tier == "embedded" ? kiln::Tier::embedded
                              : tier == "disk"   ? kiln::Tier::disk
                              : tier == "ptx"    ? kiln::Tier::ptx
                                                 : kiln::Tier::jit;
  if (k.provenance.source != expected) return 1;
  std::vector<double> batches;
  for (int b = 0; b < 51; ++b) {
    constexpr int n = 10'000;
    const double t0 = now_ms();
    for (int i = 0; i < n; ++i) {
      kiln::Kernel again = registry.get(kernel);
      asm volatile("" : : "r"(again.function) : "memory");
    }
    batches.push_back((now_ms() - t0) * 1e6 / n);
  }
  std::printf("%.6f %.6f %.3f\n", t_context - t_main, t_get - t_context, median(batches));
  return 0;
}

std::string json(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          out += esc;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + json(list[i]);
  return out + "]";
}

// What the JIT tier would hand NVRTC for each subject; its headers written under `base`/<kernel> for CuPy,
// which reads headers from directories.
void export_sources(const std::string& path, unsigned arch, const std::string& base) {
  std::ofstream out(path);
  out << "[\n";
  for (std::size_t i = 0; i < std::size(kSubjects); ++i) {
    const Subject& s = kSubjects[i];
    const kiln::Catalog& catalog = catalog_of(s.registry);
    const kiln::KernelEntry* entry = catalog.find(s.kernel);
    const auto request = kiln::detail::make_request(catalog, entry->unit, arch);
    const std::filesystem::path dir = std::filesystem::path(base) / s.kernel;
    for (const auto& h : request.headers) {
      std::filesystem::create_directories((dir / h.name).parent_path());
      std::ofstream(dir / h.name, std::ios::binary) << h.content;
    }
    std::string expression;
    for (std::size_t k = 0; k < request.kernels.size(); ++k)
      if (request.kernels[k].name == s.kernel) expression = request.expressions[k];
    out << "  {\"label\": " << json(s.label) << ", \"registry\": " << json(s.registry) << ", \"kernel\": " << json(s.kernel)
        << ", \"expression\": " << json(expression) << ",\n   \"options\": " << json(request.options)
        << ", \"include_dirs\": " << json(std::vector<std::string>{dir.string()}) << ",\n   \"source\": " << json(request.source) << "}"
        << (i + 1 < std::size(kSubjects) ? ",\n" : "\n");
  }
  out << "]\n";
}

// nvcc's own cubin of `kernel`'s unit for `arch` in `dir`/plain.cubin, from the translation unit and headers
// the catalog carries; false (with nvcc's output shown) when nvcc is not there or fails.
bool nvcc_cubin(const kiln::Catalog& catalog, const kiln::KernelEntry& entry, unsigned arch, const std::string& dir) {
  const auto request = kiln::detail::make_request(catalog, entry.unit, arch);
  for (const auto& h : request.headers) {
    std::filesystem::create_directories((std::filesystem::path(dir) / h.name).parent_path());
    std::ofstream(std::filesystem::path(dir) / h.name, std::ios::binary) << h.content;
  }
  std::ofstream(std::filesystem::path(dir) / "unit.cu", std::ios::binary) << request.source;
  const char* toolkit = std::getenv("KILN_TOOLKIT");
  std::string command = std::string(toolkit ? toolkit : "/usr/local/cuda") + "/bin/nvcc -cubin -arch=sm_" +
                        std::to_string(arch);
  for (const auto& option : request.options) command += " '" + option + "'";
  command += " -I'" + dir + "' -o '" + dir + "/plain.cubin' '" + dir + "/unit.cu'";
  return std::system(command.c_str()) == 0;
}

// The driver alone: nvcc's cubin of the CUB example against the lean one the build embeds.
void raw_load_table(const char* self, unsigned arch, int runs) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const kiln::KernelEntry* entry = catalog.find("block_sum_f32");
  const kiln::BinaryEntry* lean = kiln::select_binary(catalog, catalog.units[entry->unit], arch, false);
  std::printf("\nThe driver alone, CUB example (block_sum_f32): the first library in a fresh context "
              "(cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction), medians of %d fresh processes\n\n", runs);
  if (lean == nullptr || lean->arch != arch || lean->kind != kiln::BinaryKind::cubin) {
    std::printf("(not run: the build embeds no sm_%u cubin)\n", arch);
    return;
  }
  const std::string dir = make_temp_dir("raw");
  const std::string lean_path = dir + "/lean.cubin";
  const std::string bytes = catalog.image(*lean);  // read out of its fatbin, as the embedded tier loads it
  std::ofstream(lean_path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                    static_cast<std::streamsize>(bytes.size()));
  const std::string lowered(catalog.str(entry->lowered));
  std::printf("| cubin | bytes | first load in a fresh context |\n|---|---:|---:|\n");
  const auto row = [&](const char* label, const std::string& path) {
    const auto times = run_children(self, {"--child", "raw", path, lowered, "-"}, runs, 1);
    std::printf("| %s | %llu | %.3f ms |\n", label, static_cast<unsigned long long>(std::filesystem::file_size(path)),
                median(times[0]));
  };
  if (nvcc_cubin(catalog, *entry, arch, dir)) row("nvcc -cubin (its unreferenced globals kept)", dir + "/plain.cubin");
  else std::printf("| nvcc -cubin | not built (no nvcc) | |\n");
  row("lean, as embedded (PTX stripped, then assembled)", lean_path);
  remove_tree(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--child") == 0) {
    try {
      return child(argv[3], argv[4], argv[5], argv[6]);
    } catch (const kiln::Error& e) {
      // One line, and the parent says what it means (a build without this GPU's PTX has no PTX row).
      std::fprintf(stderr, "bench_tiers: the %s tier did not serve %s: %s\n", argv[3], argv[5], e.what());
      return 1;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured: suite.py streams it
  int runs = 7;
  std::string export_path, json_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") runs = std::atoi(argv[i + 1]);
    else if (flag == "--export") export_path = argv[i + 1];
    else if (flag == "--json") json_path = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--runs N] [--export FILE] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const bool gpu = kiln::driver_available();
  unsigned arch = 90;  // the sources are the same for every arch; sm_90 when there is no GPU to ask
  kiln::DeviceInfo info;
  if (gpu) {
    kiln::Registry probe(kiln::examples::catalog());
    info = probe.device();
    arch = info.arch;
  }
  if (!export_path.empty()) {
    const std::string base = make_temp_dir("tiers");  // the headers stay: cupy_tiers.py includes them
    export_sources(export_path, arch, base);
    std::printf("sources for CuPy: %s (headers under %s)\n\n", export_path.c_str(), base.c_str());
  }
  if (!gpu) {
    std::printf("bench_tiers: no CUDA driver or GPU here: no tier timed\n");
    return 77;
  }
  std::printf("kiln tiers: %s (sm_%u), driver %d; medians of %d fresh processes per tier; times after the "
              "context exists (cuInit + primary context retain, timed apart)\n\n",
              info.name.c_str(), info.arch, info.driver_version, runs);
  std::printf("| kernel | context | embedded | disk | PTX | JIT cold | in-memory |\n|---|---:|---:|---:|---:|---:|---:|\n");

  std::vector<std::string> rows;
  for (const Subject& s : kSubjects) {
    // The disk tier: nvcc's cubins of the whole registry in a cache directory of their own.
    const std::string disk_dir = make_temp_dir("tiers");
    {
      kiln::CacheConfig config;
      config.dir = disk_dir;
      kiln::DiskCache cache(config);
      kiln::Registry registry(catalog_of(s.registry));
      kiln::test::fill_cache_from_embedded(registry, cache);
    }
    const auto embedded = run_children(argv[0], {"--child", "embedded", s.registry, s.kernel, "-"}, runs, 3);
    const auto disk = run_children(argv[0], {"--child", "disk", s.registry, s.kernel, disk_dir}, runs, 3);
    remove_tree(disk_dir);
    // The PTX tier, where the build embeds PTX this GPU runs (and an empty cache each time).
    std::vector<double> ptx;
    for (int r = 0; r < runs; ++r) {
      const std::string dir = make_temp_dir("tiers");
      try {
        ptx.push_back(run_children(argv[0], {"--child", "ptx", s.registry, s.kernel, dir}, 1, 3)[1][0]);
      } catch (const std::exception&) {
        ptx.clear();  // no PTX for this GPU in this build
        remove_tree(dir);
        break;
      }
      remove_tree(dir);
    }
    std::vector<double> jit;
    for (int r = 0; r < runs; ++r) {
      const std::string dir = make_temp_dir("tiers");
      jit.push_back(run_children(argv[0], {"--child", "jit", s.registry, s.kernel, dir}, 1, 3)[1][0]);
      remove_tree(dir);
    }
    char ptx_cell[32] = "no PTX";
    if (!ptx.empty()) std::snprintf(ptx_cell, sizeof ptx_cell, "%.1f ms", median(ptx));
    std::printf("| %s | %.1f ms | %.3f ms | %.3f ms | %s | %.1f ms | %.1f ns |\n", s.label, median(embedded[0]),
                median(embedded[1]), median(disk[1]), ptx_cell, median(jit), median(embedded[2]));
    char row[512];
    std::snprintf(row, sizeof row,
                  "{\"kernel\": %s, \"context_ms\": %.6f, \"embedded_ms\": %.6f, \"disk_ms\": %.6f, "
                  "\"ptx_ms\": %.6f, \"jit_ms\": %.6f, \"memory_ns\": %.3f}",
                  json(s.kernel).c_str(), median(embedded[0]), median(embedded[1]), median(disk[1]),
                  ptx.empty() ? -1.0 : median(ptx), median(jit), median(embedded[2]));
    rows.push_back(row);
  }
  raw_load_table(argv[0], arch, runs);

  // Where a cold JIT get() spends its time, every figure of a row's left part from the same processes;
  // then the same compile with the family's PCH file on disk, in a next process.
  std::printf("\nJIT cold, step by step (medians of %d fresh processes, each making the request alone, then a cold "
              "get() with the pool's trace on; after the context, whose prefetch starts the first worker)\n\n", runs);
  std::printf("| kernel | make the request (headers in memory) | cold get() | compile on the pool (queued to answered) | "
              "of which NVRTC | of which nvJitLink | cold get() less the compile (its request, publish, load) | "
              "next process, PCH on disk: compile | its NVRTC |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t i = 0; i < std::size(kSubjects); ++i) {
    const Subject& s = kSubjects[i];
    std::vector<std::vector<double>> cold(6), warm(4);
    for (int r = 0; r < runs; ++r) {
      const std::string dir = make_temp_dir("tiers");
      const auto one = run_children(argv[0], {"--child", "phases", s.registry, s.kernel, dir}, 1, 5);
      for (int f = 0; f < 5; ++f) cold[f].push_back(one[f][0]);
      cold[5].push_back(one[1][0] - one[2][0]);  // the difference within one process
      remove_tree(dir);
      const std::string pch_dir = make_temp_dir("tiers");
      try {
        run_children(argv[0], {"--child", "pch-build", s.registry, s.kernel, pch_dir}, 1, 1);
        const auto w = run_children(argv[0], {"--child", "pch-warm", s.registry, s.kernel, pch_dir}, 1, 4);
        for (int f = 0; f < 4; ++f) warm[f].push_back(w[f][0]);
      } catch (const std::exception&) {  // a unit that includes nothing has no PCH family
      }
      remove_tree(pch_dir);
    }
    char warm_compile[32] = "no PCH", warm_nvrtc[32] = "-";
    if (!warm[1].empty()) {
      std::snprintf(warm_compile, sizeof warm_compile, "%.1f ms", median(warm[1]));
      std::snprintf(warm_nvrtc, sizeof warm_nvrtc, "%.1f ms", median(warm[2]));
    }
    std::printf("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %s | %s |\n", s.label,
                median(cold[0]), median(cold[1]), median(cold[2]), median(cold[3]), median(cold[4]), median(cold[5]),
                warm_compile, warm_nvrtc);
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"device\": " << json(info.name) << ", \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) out << "  " << rows[i] << (i + 1 < rows.size() ? ",\n" : "\n");
    out << "]}\n";
  }
  return 0;
}
