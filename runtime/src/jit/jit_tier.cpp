// The process-wide JIT worker pool and the JIT tier's scratch directory.
#include "jit/jit_tier.hpp"

#include "jit/compiler/header_bundle.hpp"
#include "jit/pool/pool.hpp"

#include <kiln/error.hpp>

#include <cuda.h>

#include <sys/stat.h>
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
  if (!outcome.ok) throw Error(Errc::compile, outcome.error + "\n" + outcome.log);
  return std::move(outcome.entry);
}

CompileRequest make_request(const Catalog& catalog, std::uint32_t unit_index, unsigned arch,
                            const std::filesystem::path& base) {
  const UnitEntry& unit = catalog.units[unit_index];
  CompileRequest request;
  request.registry = std::string(catalog.name);
  request.unit = std::string(catalog.str(unit.name));
  request.source_name = request.registry + "." + request.unit + ".cu";
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

CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch) {
  const std::string toolkit = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  CacheKeyFields fields;
  fields.registry = std::string(catalog.name);
  fields.unit = std::string(catalog.str(unit.name));
  fields.source_digest = std::string(catalog.str(unit.digest));
  fields.arch = arch;
  fields.nvrtc = toolkit;
  fields.nvjitlink = toolkit;
  fields.cccl = std::string(catalog.cccl_version);
  return CacheKey::from(fields);
}

unsigned jit_parallelism() { return pool().max_workers(); }

std::filesystem::path private_temp_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::filesystem::path d = base / ("kiln-" + std::to_string(::geteuid()));
    ::mkdir(d.c_str(), 0700);
    struct stat st {};
    if (::lstat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077))
      throw Error(Errc::compile, "kiln: " + d.string() +
                                     " is not a private directory of this user; the JIT tier keeps its headers "
                                     "there when the disk cache is off: remove it, or turn the cache on");
    return d;
  }();
  return dir;
}

}  // namespace kiln::detail
