// A catalog unit's compile request, its PCH family, and its estimated compile time.
#include "jit/request.hpp"

#include "base/cubin_elf.hpp"
#include "chain/entry.hpp"  // entries_path
#include "jit/compile_history.hpp"
#include "jit/headers.hpp"
#include "jit/include_scan.hpp"
#include "jit/pch_store.hpp"
#include "jit/pool/settings.hpp"  // worker_glibc_tunables

#include <algorithm>
#include <kiln/error.hpp>
#include <stdexcept>

namespace kiln::detail {
namespace {

// compile_estimate_ms's fixed cost and headers' parse (its note says where they come from).
constexpr double kFixedMs = 40, kHeaderMsPerMiB = 150;

}  // namespace

double compile_estimate_ms(const Catalog& catalog, std::uint32_t unit_index, bool from_ptx) {
  // Fitted to one-thread compiles on a 16-core H100 host (bench_unit_phases; docs/DESIGN.md,
  // "Scheduling a table"): a compile's fixed cost; NVRTC reading CCCL's 7-9 MiB of headers, ~1.3 s;
  // the code, ~25 ms per KiB of cubin (segmented_sort's 326 KiB, 9.7 s; exclusive_scan's 27 KiB, 2.0 s)
  // or ~11 per KiB of PTX (2.3 times a cubin's bytes); the PTX tier's ptxas alone, ~7 per KiB of cubin.
  // Code that includes nothing (no CCCL templates to instantiate) costs 0.45 of that per KiB: the
  // 200-unit registry's 198 generated units, 6-89 KiB of cubin, took 12.4 ms per KiB on 16 busy
  // workers against 25-27 for its CUB units (the pool's trace, KILN_JIT_TRACE).
  constexpr double kCubinMsPerKiB = 25, kPtxMsPerKiB = 11, kAssembleMsPerKiB = 7, kPlainCodeFactor = 0.45;
  const UnitEntry& unit = catalog.units[unit_index];
  double cubin = 0, ptx = 0;  // KiB of the largest of each kind
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == BinaryKind::cubin) cubin = std::max(cubin, b.size / 1024.0);
    if (b.kind == BinaryKind::ptx) ptx = std::max(ptx, b.size / 1024.0);
  }
  if (from_ptx) return kFixedMs + (cubin > 0 ? cubin : ptx / 2.3) * kAssembleMsPerKiB;
  if (cubin == 0 && ptx == 0) return source_estimate_ms(catalog, unit_index);
  const double code = (cubin > 0 ? cubin * kCubinMsPerKiB : ptx * kPtxMsPerKiB) * (unit.header_count == 0 ? kPlainCodeFactor : 1);
  return compile_shared_ms(catalog, unit_index) + code;
}

double compile_shared_ms(const Catalog& catalog, std::uint32_t unit_index) {
  const UnitEntry& unit = catalog.units[unit_index];
  double headers = 0;  // MiB
  for (std::uint32_t i = 0; i < unit.header_count; ++i)
    headers += catalog.headers[catalog.unit_headers[unit.first_header + i]].size / (1024.0 * 1024.0);
  return kFixedMs + headers * kHeaderMsPerMiB;
}

namespace {

// source_estimate_ms of `source` with its headers in memory (`header_bytes` of them, named `given`), its
// options one per line and `expressions` name expressions.
double estimate_of_source(std::string_view source, double header_bytes,
                          const std::vector<std::string_view>& given, std::string_view options, std::size_t expressions) {
  // With no binary to size (a program given at run time, a JIT-only unit): the bytes of its source at
  // kSourceMsPerKiB (fitted on the corpus of real run-time sources, bench/corpus.py; docs/DESIGN.md,
  // "Estimates"), plus each name expression's instantiation, plus the parse of its headers: those given
  // in memory (a table's bundle) as a table unit's headers are counted, what it includes from its -I
  // directories (CCCL from the toolkit's among them) at kIncludedMsPerMiB. Headers are parsed, not
  // compiled as the source's code is: counted at the source's rate, a JIT-only table's unit with CuPy's
  // ~3 MiB of headers bundled was estimated at 88 s against 1.4 s measured.
  // Fitted on the corpus's 373 units without CCCL on an H200 host (one-thread compile on a 16-worker pool):
  // 259 ms + 28.6 ms per KiB of source; of the 259, what they include (~4 MiB scanned, far less parsed:
  // include guards and #if) at kIncludedMsPerMiB.
  constexpr double kSourceMsPerKiB = 28, kExpressionMs = 4, kIncludedMsPerMiB = 50;
  // What it includes from its -I directories (CCCL's among them, for a program): parsed on every compile.
  const double included = static_cast<double>(included_bytes(source, given, include_dirs_of(options)));
  return kFixedMs + header_bytes / (1024.0 * 1024.0) * kHeaderMsPerMiB + included / (1024.0 * 1024.0) * kIncludedMsPerMiB +
         static_cast<double>(source.size()) / 1024.0 * kSourceMsPerKiB + static_cast<double>(expressions) * kExpressionMs;
}

}  // namespace

double source_estimate_ms(const Catalog& catalog, std::uint32_t unit_index) {
  const UnitEntry& unit = catalog.units[unit_index];
  const std::string_view source = catalog.str(unit.source);
  double headers = 0;
  std::vector<std::string_view> given;
  for (std::uint32_t i = 0; i < unit.header_count; ++i) {
    const HeaderEntry& h = catalog.headers[catalog.unit_headers[unit.first_header + i]];
    headers += h.size;
    given.push_back(catalog.str(h.name));
  }
  std::size_t expressions = 0;
  for (const KernelEntry& k : catalog.kernels) expressions += k.unit == unit_index;
  return estimate_of_source(source, headers, given, catalog.str(unit.options), expressions);
}

double source_estimate_ms(const UnitSource& unit) {
  double headers = 0;
  std::vector<std::string_view> given;
  for (const Header& h : unit.headers) {
    headers += static_cast<double>(h.content.size());
    given.push_back(h.name);
  }
  std::string options;
  for (const std::string& o : unit.options) options.append(o).push_back('\n');
  return estimate_of_source(unit.source, headers, given, options, unit.expressions.size());
}

double unit_estimate_ms(const Catalog& catalog, std::uint32_t unit_index, const std::filesystem::path& cache_root) {
  const std::string_view digest = catalog.str(catalog.units[unit_index].digest);
  return compile_history(cache_root).lookup(digest).value_or(compile_estimate_ms(catalog, unit_index));
}

std::vector<double> kernel_code_shares(const Catalog& catalog, std::uint32_t unit_index) {
  const UnitEntry& unit = catalog.units[unit_index];
  const BinaryEntry* newest = nullptr;
  for (const BinaryEntry& b : catalog.binaries_of(unit))
    if (b.kind == BinaryKind::cubin && (newest == nullptr || b.arch > newest->arch)) newest = &b;
  if (newest == nullptr) return {};
  Cubin cubin;
  try {
    cubin = read_cubin(catalog.image(*newest));
  } catch (const Error&) {
    return {};  // a damaged image: its sizes are unknown (the registry reports the image where it loads it)
  }
  std::vector<double> shares;
  double total = 0;
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit_index) continue;
    const auto it = cubin.kernel_bytes.find(catalog.str(k.lowered));
    if (it == cubin.kernel_bytes.end() || it->second == 0) return {};
    shares.push_back(static_cast<double>(it->second));
    total += static_cast<double>(it->second);
  }
  for (double& share : shares) share /= total;
  return shares;
}

std::vector<std::uint32_t> longest_first(const Catalog& catalog, std::vector<std::uint32_t> units) {
  std::vector<double> estimate(catalog.units.size());
  for (const std::uint32_t u : units) estimate[u] = compile_estimate_ms(catalog, u);
  std::stable_sort(units.begin(), units.end(), [&](std::uint32_t a, std::uint32_t b) { return estimate[a] > estimate[b]; });
  return units;
}

UnitSource unit_source(const Catalog& catalog, std::uint32_t unit_index) {
  const UnitEntry& unit = catalog.units[unit_index];
  UnitSource source;
  source.registry = std::string(catalog.name);
  source.unit = std::string(catalog.str(unit.name));
  source.source_name = std::string(catalog.str(unit.source_name));
  source.source = std::string(catalog.str(unit.source));
  const std::string_view options = catalog.str(unit.options);
  for (std::size_t start = 0; start < options.size();) {
    const std::size_t end = std::min(options.find('\n', start), options.size());
    source.options.emplace_back(options.substr(start, end - start));
    start = end + 1;
  }
  source.headers = unit_headers(catalog, unit);
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit_index) continue;
    source.kernels.push_back({std::string(catalog.str(k.name)), std::string(catalog.str(k.lowered))});
    source.expressions.emplace_back(catalog.str(k.expression));
  }
  source.headers_digest = std::string(catalog.header_bundle_digest);
  return source;
}

CompileRequest make_request(UnitSource unit, unsigned arch) {
  CompileRequest request;
  request.registry = std::move(unit.registry);
  request.unit = std::move(unit.unit);
  request.source_name = std::move(unit.source_name);
  request.source = std::move(unit.source);
  request.options = std::move(unit.options);
  request.headers = std::move(unit.headers);
  request.kernels = std::move(unit.kernels);
  request.expressions = std::move(unit.expressions);
  request.arch = arch;
  return request;
}

CompileRequest make_request(const Catalog& catalog, std::uint32_t unit_index, unsigned arch) {
  return make_request(unit_source(catalog, unit_index), arch);
}

Result<CompileRequest> part_request(const CompileRequest& unit, const std::vector<std::size_t>& kernels) {
  if (kernels.empty()) return fail("kiln: a part of unit " + unit.unit + " names no kernel");
  CompileRequest part = unit;
  part.kernels.clear();
  part.expressions.clear();
  std::vector<bool> taken(unit.kernels.size());
  for (const std::size_t k : kernels) {
    if (k >= unit.kernels.size() || k >= unit.expressions.size())
      return fail("kiln: unit " + unit.unit + " has no kernel " + std::to_string(k));
    if (taken[k]) return fail("kiln: a part of unit " + unit.unit + " names kernel " + std::to_string(k) + " twice");
    taken[k] = true;
    part.kernels.push_back(unit.kernels[k]);
    part.expressions.push_back(unit.expressions[k]);
  }
  return part;
}

std::vector<KeyPart> unit_key_parts(const Catalog& catalog, std::uint32_t unit_index) {
  return key_parts(unit_source(catalog, unit_index));
}

PchFamily request_family(const CompileRequest& request, std::string_view headers_digest, const DiskCache& cache) {
  if (!cache.usable()) return {};
  std::string key = pch_family(request, headers_digest, worker_glibc_tunables());
  if (key.empty()) return {};
  // A path, not a descriptor: NVRTC opens the file itself. The directory is the cache's, vetted when
  // the cache was opened and before every store.
  std::filesystem::path path = pch_path(entries_path(cache.config().dir), key);
  return {std::move(key), std::move(path)};
}

}  // namespace kiln::detail
