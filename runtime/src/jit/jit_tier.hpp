// The JIT tier's process-wide pieces: the worker pool, and where it keeps files without a cache.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/pool/pool.hpp"  // JitPoolStats

#include <kiln/catalog.hpp>

#include <filesystem>

namespace kiln::detail {

// Compiles on the process-wide pool of kiln-jitd workers (started on first use, sized by
// KILN_JIT_WORKERS), or in this process when no worker can be started.
CompileOutcome jit_compile(const CompileRequest& request);

// The request that compiles unit `unit` of `catalog` for `arch`: its translation unit, options, kernels,
// the headers from the catalog's bundle (unpacked under `base`), and NVRTC's PCH directory under `base`.
CompileRequest make_request(const Catalog& catalog, std::uint32_t unit, unsigned arch, const std::filesystem::path& base);

// The disk-cache key of a unit's binary for `arch`. The compiler versions are the toolkit's kiln was
// built with: the JIT compiles with the headers bundled from that toolkit.
CacheKey unit_cache_key(const Catalog& catalog, const UnitEntry& unit, unsigned arch);

// jit_compile's entry, or Error(compile) carrying the outcome's error line and the compiler's full log:
// what a build function handed to DiskCache::get_or_build wants (a throw stores nothing).
CacheEntry jit_compile_entry(const CompileRequest& request);

// How many compiles the pool runs at once.
unsigned jit_parallelism();

// What the process-wide pool has done so far: workers started from the executable and forked (for the
// benchmarks; starts nothing new beyond the pool object).
JitPoolStats jit_pool_stats();

// A private (0700) directory for unpacked headers and PCH when the disk cache is off:
// $TMPDIR/kiln-<uid>, created once per process.
std::filesystem::path private_temp_dir();

}  // namespace kiln::detail
