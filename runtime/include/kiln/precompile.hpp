// Fill the disk cache ahead of time for an architecture, with no GPU needed.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <kiln/catalog.hpp>
#include <kiln/error.hpp>     // Reason
#include <kiln/registry.hpp>  // LinkedSource

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

// What became of one unit: compiled and cached (ok, compiled), already cached (ok, cached), compiled but
// not kept by the cache (!ok, compiled: a read-only directory, a cap smaller than the entry), or failed.
// A unit that failed is a result, not an exception: precompile goes on with the others.
struct PrecompileResult {
  std::string unit;
  bool ok = false;        // the unit is in the disk cache now, as asked
  bool cached = false;    // the disk cache had it already (or another process built it meanwhile), or the remote cache
  bool from_remote = false;  // cached: fetched from the remote cache (another machine built it), not found on disk
  bool compiled = false;  // compiled by this call, whether the cache kept it or not
  double ms = 0;
  // !ok: why (Reason, kiln/error.hpp): compile, with the unit, options and the compiler's full log; cache,
  // why the cache did not keep it; unknown_kernel, no_compiler, ... as the same failure would throw.
  Reason error;
  // The cache kept (or had) it, then it was gone before precompile returned: evicted for its cap where the
  // units asked for do not all fit, else removed by another process (kiln cache clear); `error` says which.
  // Not ok. Results say what is in the cache when precompile returns; progress said what was
  // when each unit was done.
  bool evicted = false;
};

// Compiles the units of `kernels` (every unit when empty) for `arch` (90 for sm_90) with the JIT tier,
// `jobs` at a time (0: every unit at once, the pool running as many as it has workers), and publishes
// them to the default disk cache, and to the default remote cache when one is configured
// (KILN_REMOTE_CACHE): units another machine published are fetched from it instead (`cached`), and a unit
// another machine is compiling is waited for. Calls
// `progress` after each unit, from the calling thread (what it throws is the caller's, and comes back once
// the units under way are done). Throws kiln::Error: unknown_kernel for an unknown kernel name, no_binary
// for a linked unit's, cache for a disabled or refused cache. A unit that cannot be compiled (NVRTC missing,
// a compile error, no thread to be had) is a result with its Reason. A thread that cannot be started leaves
// its share to the threads there are, the calling thread last.
std::vector<PrecompileResult> precompile(
    const Catalog& catalog, unsigned arch, const std::vector<std::string>& kernels = {}, unsigned jobs = 0,
    const std::function<void(const PrecompileResult&, std::size_t done, std::size_t total)>& progress = {});

// Compiles the linked units of `kernels` (every linked unit when empty) with `link` for `arch`, as
// Registry::get(name, link) builds them on a device of that architecture (the unit's embedded LTO-IR, or its
// source, linked with the link's code by NVRTC and nvJitLink), into the default disk cache (and the remote
// cache when one is configured), one unit after another. No GPU is needed: CI catches an operator that does
// not compile or link. A unit that fails is a result (!ok, the compiler's log in `error`). Throws
// kiln::Error for an unknown kernel name or one whose unit is not linked, a catalog with no linked unit, a
// disabled or refused cache, or missing NVRTC.
std::vector<PrecompileResult> precompile_linked(const Catalog& catalog, unsigned arch,
                                                const std::vector<std::string>& kernels, const LinkedSource& link);

}  // namespace kiln
