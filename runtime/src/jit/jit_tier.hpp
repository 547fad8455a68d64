// The JIT tier: a unit's compile request, the process-wide worker pool, and building a unit into the cache.
#pragma once

#include "jit/compiler/compile.hpp"
#include "jit/pool/pool.hpp"  // JitPoolStats, PchFamily

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/registry.hpp>  // LinkedSource
#include <kiln/remote.hpp>

#include <string_view>
#include <vector>

namespace kiln::detail {

// Compiles on the process-wide pool of kiln-jitd workers (started on first use, sized by
// KILN_JIT_WORKERS), or in this process when no worker can be started.
// `estimate_ms`: compile_estimate_ms's, for the pool's order and threads (0: unknown).
CompileOutcome jit_compile(const CompileRequest& request, PchFamily family = {}, double estimate_ms = 0);

// How long compiling unit `unit` of `catalog` takes on one thread, roughly: from the bytes of the headers
// it includes and of the code it makes (an embedded binary of another architecture), with `from_ptx`
// the PTX tier's assembly alone. Only ever compared with other estimates: the pool takes the longest
// compile first and gives it threads where it would finish last (docs/DESIGN.md, "Scheduling a table").
double compile_estimate_ms(const Catalog& catalog, std::uint32_t unit, bool from_ptx = false);

// `units` of `catalog`, the longest compile first (compile_estimate_ms; ties keep their order): the order
// in which kiln::precompile and warm-up hand them to the pool.
std::vector<std::uint32_t> longest_first(const Catalog& catalog, std::vector<std::uint32_t> units);

// The request that compiles unit `unit` of `catalog` for `arch`: its translation unit, options, kernels
// and the headers it includes, from the catalog's bundle, in memory.
CompileRequest make_request(const Catalog& catalog, std::uint32_t unit, unsigned arch);

// The PCH family of a catalog's request, with its file in `cache` (empty when the cache is not usable).
PchFamily request_family(const Catalog& catalog, const CompileRequest& request, const DiskCache& cache);

// jit_compile's entry, or Error(compile) carrying the outcome's error line and the compiler's full log:
// what a build function handed to DiskCache::get_or_build wants (a throw stores nothing).
CacheEntry jit_compile_entry(const CompileRequest& request, PchFamily family = {}, double estimate_ms = 0);

// A unit built for an architecture, through the cache.
struct BuiltUnit {
  CacheEntry entry;
  bool compiled = false;     // false: the cache had it (another process built it, or it was there already)
  bool from_remote = false;  // the remote cache had it: another machine built it
  Status stored = ok();      // compiled: whether the disk cache kept it, or why not (read-only, the cap, not in use)
  std::string key;           // the entry's key (hex)
};

// The unit's entry for `arch` from `cache`, or built and published there, under the cache's per-key
// lock, so that threads and processes sharing the cache build it once: from its source (NVRTC), or, with
// `ptx` (the text of an embedded PTX image of `ptx_arch`), by assembling that PTX (the PTX tier), under a
// key of its own when `ptx_arch` is not `arch` (unit_cache_key's code_arch). With a `remote` cache, under
// its lease too, so that the fleet builds it once, and published there (remote/remote_tier.hpp). With an unusable cache it
// is built without one. Throws Error(compile) or Error(no_compiler) when it cannot be built; what the
// registry's JIT and PTX tiers and kiln::precompile share.
BuiltUnit build_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache,
                           RemoteCache* remote = nullptr, std::string_view ptx = {}, unsigned ptx_arch = 0);

// A unit whose kernels call what `link` defines (Registry::get with a LinkedSource): the same, under `key`
// (linked_cache_key: the unit's key with link.source's digest), link.source compiled to LTO-IR and
// linked with the unit's: `lto_ir`, the unit's embedded LTO-IR (select_lto_ir), or, without it, the
// unit's source compiled to LTO-IR. Once fleet-wide through `remote`, as build_into_cache: another
// machine's entry for the same operator text is fetched instead of compiled.
BuiltUnit build_linked_into_cache(const Catalog& catalog, std::uint32_t unit, unsigned arch, DiskCache& cache,
                                  RemoteCache* remote, const CacheKey& key, const LinkedSource& link,
                                  const BinaryEntry* lto_ir);

// How many compiles the pool runs at once.
unsigned jit_parallelism();

// How many requests warm-up and precompile hand the pool at once (each waits on a thread of its own):
// all of a registry's units, up to this. The pool runs jit_parallelism() of them and orders the rest.
inline constexpr unsigned kMaxJitRequestsInFlight = 256;

// What the process-wide pool has done so far (for the benchmarks and `kiln status`).
JitPoolStats jit_pool_stats();

}  // namespace kiln::detail
