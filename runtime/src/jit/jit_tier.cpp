// The JIT tier's step in the chain, the process-wide worker pool, and building a unit into the cache.
#include "jit/jit_tier.hpp"

#include "base/private_dir.hpp"
#include "disk/cache_internal.hpp"
#include "disk/unit_key.hpp"
#include "jit/compiler/header_bundle.hpp"
#include "jit/pool/pool.hpp"
#include "registry/tier.hpp"

#include <kiln/error.hpp>

#include <unistd.h>

#include <algorithm>

namespace kiln::detail {
namespace {

JitPool& pool() {
  // Leaked on purpose: its workers must outlive registries destroyed during static destruction.
  static JitPool& instance = *new JitPool();
  return instance;
}

}  // namespace

CompileOutcome jit_compile(const CompileRequest& request) { return pool().compile(request); }

JitPoolStats jit_pool_stats() { return pool().stats(); }

CacheEntry jit_compile_entry(const CompileRequest& request) {
  CompileOutcome outcome = jit_compile(request);
  if (!outcome.entry) throw Error(Errc::compile, outcome.entry.error() + "\n" + outcome.log);
  return std::move(outcome.entry).value();
}

CompileRequest make_request(const Catalog& catalog, std::uint32_t unit_index, unsigned arch,
                            const std::filesystem::path& base) {
  const UnitEntry& unit = catalog.units[unit_index];
  CompileRequest request;
  request.registry = std::string(catalog.name);
  request.unit = std::string(catalog.str(unit.name));
  request.source_name = std::string(catalog.str(unit.source_name));
  request.source = std::string(catalog.str(unit.source));
  const std::string_view options = catalog.str(unit.options);
  for (std::size_t start = 0; start < options.size();) {
    const std::size_t end = std::min(options.find('\n', start), options.size());
    request.options.emplace_back(options.substr(start, end - start));
    start = end + 1;
  }
  request.include_dirs = include_dirs(catalog, unit, unpack_headers(catalog, base));
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit_index) continue;
    request.kernels.push_back({std::string(catalog.str(k.name)), std::string(catalog.str(k.lowered))});
    request.expressions.emplace_back(catalog.str(k.expression));
  }
  request.arch = arch;
  request.pch_dir = (base / "pch").string();
  return request;
}

BuiltUnit build_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache) {
  BuiltUnit built;
  const CacheKey key = unit_cache_key(catalog, catalog.units[unit], arch, cache);
  built.key = key.hex;
  // The request (and the header unpack it needs) only when there is something to compile.
  const auto compile = [&] {
    // The unpacked headers and NVRTC's PCH live in the cache directory, or in a private temporary one.
    const std::filesystem::path base = cache.usable() ? cache.config().dir : private_temp_dir();
    CacheEntry entry = jit_compile_entry(make_request(catalog, unit, arch, base));
    built.compiled = true;
    return entry;
  };
  if (!cache.usable()) {
    built.entry = compile();
    built.stored = fail("the disk cache is not in use (" + cache.unusable_reason() + ")");
    return built;
  }
  // The disk tier's check on what the cache holds under the key: a foreign entry is rebuilt, not served.
  BuildReport report;
  built.entry = get_or_build_checked(cache, key, compile, [&](const CacheEntry& e) { return entry_serves_unit(catalog, unit, e); },
                                     report);
  built.stored = std::move(report.stored);
  return built;
}

unsigned jit_parallelism() { return pool().max_workers(); }

std::filesystem::path private_temp_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::filesystem::path d = base / ("kiln-" + std::to_string(::geteuid()));
    Status usable = make_private_dirs(d);
    if (usable) usable = vet_private_dir(d, "remove it, or turn the disk cache on (KILN_CACHE)");
    if (!usable)
      throw Error(Errc::cache, "kiln: the JIT tier keeps its headers in " + d.string() +
                                   " when the disk cache is off, and cannot: " + usable.error());
    return d;
  }();
  return dir;
}

// The tier's step: compiled on first get(), if NVRTC can be loaded then.
Result<UnitProbe> probe_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  return UnitProbe{Tier::jit, q.arch, false};
}

Result<UnitImage> fetch_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  BuiltUnit built = build_into_cache(q.catalog, q.unit_index(), q.arch, q.cache);
  UnitImage image;
  image.source = built.compiled ? Tier::jit : Tier::disk;  // disk: another process built it meanwhile
  image.arch = q.arch;
  image.owned = std::move(built.entry.cubin);
  image.cache_key = std::move(built.key);
  image.label = "sm_" + std::to_string(q.arch) + " compiled by the JIT tier";
  return image;
}

}  // namespace kiln::detail
