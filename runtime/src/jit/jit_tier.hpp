// The JIT tier: a unit's compile request, the process-wide worker pool, and building a unit into the cache.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/pool/pool.hpp"  // JitPoolStats

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <filesystem>

namespace kiln::detail {

// Compiles on the process-wide pool of kiln-jitd workers (started on first use, sized by
// KILN_JIT_WORKERS), or in this process when no worker can be started.
CompileOutcome jit_compile(const CompileRequest& request);

// The request that compiles unit `unit` of `catalog` for `arch`: its translation unit, options, kernels,
// the headers from the catalog's bundle (unpacked under `base`), and NVRTC's PCH directory under `base`.
CompileRequest make_request(const Catalog& catalog, std::uint32_t unit, unsigned arch, const std::filesystem::path& base);

// jit_compile's entry, or Error(compile) carrying the outcome's error line and the compiler's full log:
// what a build function handed to DiskCache::get_or_build wants (a throw stores nothing).
CacheEntry jit_compile_entry(const CompileRequest& request);

// A unit built for an architecture, through the cache.
struct BuiltUnit {
  CacheEntry entry;
  bool compiled = false;  // false: the cache had it (another process built it, or it was there already)
  Status stored = ok();   // compiled: whether the cache kept it, or why not (read-only, the cap, not in use)
  std::string key;        // the entry's key (hex)
};

// The unit's entry for `arch` from `cache`, or compiled and published there, under the cache's per-key
// lock, so that threads and processes sharing the cache compile it once. With an unusable cache it is
// compiled without one (headers and PCH in private_temp_dir()). Throws Error(compile) or
// Error(no_compiler) when it cannot be compiled; what the registry's JIT tier and kiln::precompile share.
BuiltUnit build_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache);

// How many compiles the pool runs at once.
unsigned jit_parallelism();

// What the process-wide pool has done so far: workers started from the executable and forked (for the
// benchmarks; starts nothing new beyond the pool object).
JitPoolStats jit_pool_stats();

// A private (0700) directory for unpacked headers and PCH when the disk cache is off:
// $TMPDIR/kiln-<uid>, created once per process. Throws Error(cache) when it is not private.
std::filesystem::path private_temp_dir();

}  // namespace kiln::detail
