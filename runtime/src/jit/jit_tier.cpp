// The JIT tier's step in the chain, the process-wide worker pool, and building a unit into the cache.
#include "jit/jit_tier.hpp"

#include "base/fatbin.hpp"
#include "disk/cache_internal.hpp"
#include "disk/directory.hpp"
#include "disk/unit_key.hpp"
#include "jit/headers.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/pool.hpp"
#include "jit/pool/settings.hpp"  // worker_glibc_tunables
#include "registry/tier.hpp"
#include "remote/remote_tier.hpp"

#include <kiln/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>

namespace kiln::detail {
namespace {

JitPool& pool() {
  // Leaked on purpose: its workers must outlive registries destroyed during static destruction.
  static JitPool& instance = *new JitPool();
  return instance;
}

}  // namespace

CompileOutcome jit_compile(const CompileRequest& request, PchFamily family, double estimate_ms) {
  return pool().compile(request, std::move(family), estimate_ms);
}

JitPoolStats jit_pool_stats() { return pool().stats(); }

CacheEntry jit_compile_entry(const CompileRequest& request, PchFamily family, double estimate_ms) {
  CompileOutcome outcome = jit_compile(request, std::move(family), estimate_ms);
  if (!outcome.entry) throw Error(Errc::compile, outcome.entry.error() + "\n" + outcome.log);
  return std::move(outcome.entry).value();
}

double compile_estimate_ms(const Catalog& catalog, std::uint32_t unit_index, bool from_ptx) {
  // Fitted to one-thread compiles on a 16-core H100 host (bench_unit_phases; docs/DESIGN.md,
  // "Scheduling a table"): a compile's fixed cost; NVRTC reading CCCL's 7-9 MiB of headers, ~1.3 s;
  // the code, ~25 ms per KiB of cubin (segmented_sort's 326 KiB, 9.7 s; exclusive_scan's 27 KiB, 2.0 s)
  // or ~11 per KiB of PTX (2.3 times a cubin's bytes); the PTX tier's ptxas alone, ~7 per KiB of cubin.
  // Code that includes nothing (no CCCL templates to instantiate) costs 0.45 of that per KiB: the
  // 200-unit registry's 198 generated units, 6-89 KiB of cubin, took 12.4 ms per KiB on 16 busy
  // workers against 25-27 for its CUB units (the pool's trace, KILN_JIT_TRACE).
  constexpr double kFixedMs = 40, kHeaderMsPerMiB = 150, kCubinMsPerKiB = 25, kPtxMsPerKiB = 11,
                   kAssembleMsPerKiB = 7, kPlainCodeFactor = 0.45;
  const UnitEntry& unit = catalog.units[unit_index];
  double cubin = 0, ptx = 0;  // KiB of the largest of each kind
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == BinaryKind::cubin) cubin = std::max(cubin, b.size / 1024.0);
    if (b.kind == BinaryKind::ptx) ptx = std::max(ptx, b.size / 1024.0);
  }
  if (from_ptx) return kFixedMs + (cubin > 0 ? cubin : ptx / 2.3) * kAssembleMsPerKiB;
  double headers = 0;  // MiB
  for (std::uint32_t i = 0; i < unit.header_count; ++i)
    headers += catalog.headers[catalog.unit_headers[unit.first_header + i]].size / (1024.0 * 1024.0);
  const double code = (cubin > 0 ? cubin * kCubinMsPerKiB : ptx * kPtxMsPerKiB) * (unit.header_count == 0 ? kPlainCodeFactor : 1);
  return kFixedMs + headers * kHeaderMsPerMiB + code;
}

std::vector<std::uint32_t> longest_first(const Catalog& catalog, std::vector<std::uint32_t> units) {
  std::vector<double> estimate(catalog.units.size());
  for (const std::uint32_t u : units) estimate[u] = compile_estimate_ms(catalog, u);
  std::stable_sort(units.begin(), units.end(), [&](std::uint32_t a, std::uint32_t b) { return estimate[a] > estimate[b]; });
  return units;
}

CompileRequest make_request(const Catalog& catalog, std::uint32_t unit_index, unsigned arch) {
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
  request.headers = unit_headers(catalog, unit);
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit_index) continue;
    request.kernels.push_back({std::string(catalog.str(k.name)), std::string(catalog.str(k.lowered))});
    request.expressions.emplace_back(catalog.str(k.expression));
  }
  request.arch = arch;
  return request;
}

PchFamily request_family(const Catalog& catalog, const CompileRequest& request, const DiskCache& cache) {
  if (!cache.usable()) return {};
  std::string key = pch_family(request, catalog.header_bundle_digest, worker_glibc_tunables());
  if (key.empty()) return {};
  // A path, not a descriptor: NVRTC opens the file itself. The directory is the cache's, vetted when
  // the cache was opened and before every store.
  std::filesystem::path path = pch_path(entries_path(cache.config().dir), key);
  return {std::move(key), std::move(path)};
}

namespace {

// built.entry from `cache` under `key`, or from build() once fleet-wide (`remote`'s lease around it, the
// entry published there; another machine's entry when it has one) and stored in `cache`; built.stored
// says whether it was kept, built.from_remote whether another machine built it. With an unusable cache,
// built without one. The disk tier's check applies to what the cache holds: a foreign entry is rebuilt,
// not served.
void through_cache(const Catalog& catalog, std::uint32_t unit, DiskCache& cache, RemoteCache* remote,
                   const CacheKey& key, const std::function<CacheEntry()>& compile, BuiltUnit& built) {
  const auto build = [&] {
    FleetBuild fleet = build_once_in_fleet(remote, key, compile);
    built.from_remote = fleet.from_remote;
    return std::move(fleet.entry);
  };
  if (!cache.usable()) {
    built.entry = build();
    built.stored = fail("the disk cache is not in use (" + cache.unusable_reason() + ")");
    return;
  }
  BuildReport report;
  built.entry = get_or_build_checked(
      cache, key, build, [&](const CacheEntry& e) { return entry_serves_unit(catalog, unit, e); }, report);
  built.stored = std::move(report.stored);
}

}  // namespace

BuiltUnit build_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache,
                           RemoteCache* remote, std::string_view ptx, unsigned ptx_arch) {
  BuiltUnit built;
  const CacheKey key = unit_cache_key(catalog, catalog.units[unit], arch, cache, ptx.empty() ? 0 : ptx_arch);
  built.key = key.hex;
  // The request (and the headers it carries) only when there is something to build.
  const auto build = [&] {
    CompileRequest request = make_request(catalog, unit, arch);
    PchFamily family;
    if (!ptx.empty()) {
      request.ptx.assign(ptx.substr(0, ptx.find('\0')));
      request.headers.clear();
    } else {
      family = request_family(catalog, request, cache);
    }
    CacheEntry entry = jit_compile_entry(request, std::move(family), compile_estimate_ms(catalog, unit, !ptx.empty()));
    built.compiled = true;
    return entry;
  };
  through_cache(catalog, unit, cache, remote, key, build, built);
  return built;
}

BuiltUnit build_linked_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache,
                                  RemoteCache* remote, const CacheKey& key, const LinkedSource& link,
                                  const BinaryEntry* lto_ir) {
  BuiltUnit built;
  built.key = key.hex;
  const auto build = [&] {
    CompileRequest request = make_request(catalog, unit, arch);
    if (lto_ir != nullptr) {
      // Its code is that architecture's, whatever happens below: the key says so (linked_cache_key).
      request.code_arch = lto_ir->arch;
      // A damaged image is compiled from the unit's source instead, for the same architecture.
      if (auto image = embedded_image_fatbin(catalog, *lto_ir)) request.unit_lto_ir = std::move(*image);
    }
    request.link_source = link.source;
    request.link_source_name = link.name.empty() ? "linked source" : link.name;
    request.link_lto_ir = link.lto_ir;
    CacheEntry entry = jit_compile_entry(request);
    built.compiled = true;
    return entry;
  };
  through_cache(catalog, unit, cache, remote, key, build, built);
  return built;
}

unsigned jit_parallelism() { return pool().max_workers(); }

void start_jit_ahead(const UnitQuery& q) {
  // The PTX tier assembles on the same workers.
  if (q.options.use_jit || q.options.allow_ptx) pool().start_ahead(q.arch);
}

// The tier's step: compiled on first get(), if NVRTC can be loaded then.
Result<UnitProbe> probe_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  return UnitProbe{Tier::jit, q.arch, false};
}

Result<UnitImage> fetch_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  BuiltUnit built = build_into_cache(q.catalog, q.unit_index(), q.arch, q.cache(), remote_of(q.options));
  UnitImage image;
  // disk: another process built it meanwhile; remote: another machine did
  image.source = built.compiled ? Tier::jit : built.from_remote ? Tier::remote : Tier::disk;
  image.arch = q.arch;
  image.owned = std::move(built.entry.cubin);
  image.cache_key = std::move(built.key);
  image.label = "sm_" + std::to_string(q.arch) + " compiled by the JIT tier";
  return image;
}

}  // namespace kiln::detail
