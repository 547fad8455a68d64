// Time to a launchable kernel in each tier, for three kernels: a trivial one
// (vector_add), the CUB example (block_sum_f32) and a generated one of ~2,000 lines (synthetic_2000 of
// the big registry). Each tier in fresh processes: embedded, disk (nvcc's cubins put in a cache
// directory), JIT cold (empty cache directory), and the in-memory get() after them. Context creation
// (cuInit + retaining the primary context) is done and timed before the tier's own time starts, and is
// reported in a row of its own.
//
// `--export FILE` also writes, for each kernel, what the JIT tier hands NVRTC (the translation unit,
// options, include directories of the unpacked header bundle, name expression) as JSON, so that
// cupy_tiers.py can time CuPy on the same source. Needs a GPU.
//
// `--json FILE` writes the medians (ms; in-memory in ns) for suite.py's kiln/CuPy ratios.
//
// A second table splits a cold JIT get() into its steps, each measured in fresh processes of its own
// (an empty directory each): unpacking the header bundle, the compile on the worker pool (its wall time,
// and the NVRTC and nvJitLink times the worker reports), and NVRTC without -pch, to show what building
// the family's precompiled header costs the first unit. The compile's wall time less NVRTC and nvJitLink
// is the worker's start, the request's trip and PTX stripping; the cold get() less the headers and the
// compile is publishing and loading (medians of different processes: a rough split).
//
//   bench_tiers [--runs N] [--export FILE] [--json FILE]
#include <kiln/kiln.hpp>

#include "big_catalog.hpp"
#include "bench_util.hpp"
#include "examples_catalog.hpp"
#include "fill_cache.hpp"
#include "jit/jit_tier.hpp"

#include <cstdio>
#include <fstream>
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

// `--child SPAWNED phases|phases-nopch REGISTRY KERNEL DIR`: the steps of a cold JIT get(), done one by one
// in the set-up of the jit child (cache directory DIR, empty; the context made first): prints header
// unpacking (ms), the compile's wall time on the pool (ms), and the NVRTC and nvJitLink times the worker
// reports (ms). phases-nopch compiles without a PCH directory.
int phases_child(const std::string& mode, const std::string& registry_name, const std::string& kernel,
                 const char* dir) {
  setenv("KILN_CACHE_DIR", dir, 1);
  const kiln::Catalog& catalog = catalog_of(registry_name);
  unsigned arch = 90;  // without a GPU (a check of this code on a machine without one): sm_90
  if (kiln::driver_available()) {
    kiln::RegistryOptions options;
    options.use_embedded = false;
    kiln::Registry registry(catalog, 0, options);
    registry.context();
    arch = registry.device().arch;
  }
  const kiln::KernelEntry* entry = catalog.find(kernel);
  const double t0 = now_ms();
  kiln::detail::CompileRequest request = kiln::detail::make_request(catalog, entry->unit, arch, dir);
  if (mode == "phases-nopch") request.pch_dir.clear();
  const double t1 = now_ms();
  const kiln::detail::CompileOutcome outcome = kiln::detail::jit_compile(request);
  const double t2 = now_ms();
  if (!outcome.entry) {
    std::fprintf(stderr, "%s\n%s\n", outcome.entry.error().c_str(), outcome.log.c_str());
    return 1;
  }
  std::printf("%.6f %.6f %.6f %.6f\n", t1 - t0, t2 - t1, outcome.nvrtc_ms, outcome.link_ms);
  return 0;
}

// `--child SPAWNED TIER REGISTRY KERNEL DIR`: prints main -> context (ms), the get() that makes the
// kernel launchable (ms), and then a second get() (ns, median of batches).
int child(const std::string& tier, const std::string& registry_name, const std::string& kernel, const char* dir) {
  if (tier.rfind("phases", 0) == 0) return phases_child(tier, registry_name, kernel, dir);
  const double t_main = now_ms();
  if (tier != "embedded") setenv("KILN_CACHE_DIR", dir, 1);
  kiln::RegistryOptions options;
  options.use_embedded = tier == "embedded";
  options.use_jit = tier == "jit";
  kiln::Registry registry(catalog_of(registry_name), 0, options);
  registry.context();
  const double t_context = now_ms();
  const kiln::Kernel k = registry.get(kernel);
  const double t_get = now_ms();
  const kiln::Tier expected = tier == "embedded" ? kiln::Tier::embedded : tier == "disk" ? kiln::Tier::disk : kiln::Tier::jit;
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

// What the JIT tier would hand NVRTC for each subject, its headers unpacked under `base`.
void export_sources(const std::string& path, unsigned arch, const std::string& base) {
  std::ofstream out(path);
  out << "[\n";
  for (std::size_t i = 0; i < std::size(kSubjects); ++i) {
    const Subject& s = kSubjects[i];
    const kiln::Catalog& catalog = catalog_of(s.registry);
    const kiln::KernelEntry* entry = catalog.find(s.kernel);
    const auto request = kiln::detail::make_request(catalog, entry->unit, arch, base);
    std::string expression;
    for (std::size_t k = 0; k < request.kernels.size(); ++k)
      if (request.kernels[k].name == s.kernel) expression = request.expressions[k];
    out << "  {\"label\": " << json(s.label) << ", \"kernel\": " << json(s.kernel)
        << ", \"expression\": " << json(expression) << ",\n   \"options\": " << json(request.options)
        << ", \"include_dirs\": " << json(request.include_dirs) << ",\n   \"source\": " << json(request.source) << "}"
        << (i + 1 < std::size(kSubjects) ? ",\n" : "\n");
  }
  out << "]\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--child") == 0) return child(argv[3], argv[4], argv[5], argv[6]);
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
    const std::string base = make_temp_dir("tiers");  // the unpacked headers stay: cupy_tiers.py includes them
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
  std::printf("| kernel | context | embedded | disk | JIT cold | in-memory |\n|---|---:|---:|---:|---:|---:|\n");

  std::vector<std::string> rows;
  std::vector<double> jit_medians;
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
    std::vector<double> jit;
    for (int r = 0; r < runs; ++r) {
      const std::string dir = make_temp_dir("tiers");
      jit.push_back(run_children(argv[0], {"--child", "jit", s.registry, s.kernel, dir}, 1, 3)[1][0]);
      remove_tree(dir);
    }
    jit_medians.push_back(median(jit));
    std::printf("| %s | %.1f ms | %.3f ms | %.3f ms | %.1f ms | %.1f ns |\n", s.label, median(embedded[0]),
                median(embedded[1]), median(disk[1]), median(jit), median(embedded[2]));
    char row[512];
    std::snprintf(row, sizeof row,
                  "{\"kernel\": %s, \"context_ms\": %.6f, \"embedded_ms\": %.6f, \"disk_ms\": %.6f, "
                  "\"jit_ms\": %.6f, \"memory_ns\": %.3f}",
                  json(s.kernel).c_str(), median(embedded[0]), median(embedded[1]), median(disk[1]), median(jit),
                  median(embedded[2]));
    rows.push_back(row);
  }

  // Where a cold JIT get() spends its time.
  std::printf("\nJIT cold, step by step (medians of %d fresh processes each, after the context; the compile is "
              "the first on a new worker pool, so it includes starting a worker)\n\n", runs);
  std::printf("| kernel | unpack headers | compile on the pool | of which NVRTC (-pch) | of which nvJitLink | "
              "NVRTC without -pch | cold get() less these two |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t i = 0; i < std::size(kSubjects); ++i) {
    const Subject& s = kSubjects[i];
    std::vector<std::vector<double>> with(4), without(4);
    for (int r = 0; r < runs; ++r) {
      for (const char* mode : {"phases", "phases-nopch"}) {
        const std::string dir = make_temp_dir("tiers");
        const auto one = run_children(argv[0], {"--child", mode, s.registry, s.kernel, dir}, 1, 4);
        remove_tree(dir);
        auto& into = std::strcmp(mode, "phases") == 0 ? with : without;
        for (int f = 0; f < 4; ++f) into[f].push_back(one[f][0]);
      }
    }
    const double unpack = median(with[0]), compile = median(with[1]);
    std::printf("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms |\n", s.label, unpack, compile,
                median(with[2]), median(with[3]), median(without[2]), jit_medians[i] - unpack - compile);
  }

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"device\": " << json(info.name) << ", \"rows\": [\n";
    for (std::size_t i = 0; i < rows.size(); ++i) out << "  " << rows[i] << (i + 1 < rows.size() ? ",\n" : "\n");
    out << "]}\n";
  }
  return 0;
}
