// What the JIT tier asks its pool for a catalog unit: the compile request, its PCH family, and how long
// it will take (the pool's order).
#pragma once

#include "chain/key_parts.hpp"
#include "jit/compiler/compile.hpp"
#include "jit/pool/pool.hpp"  // PchFamily

#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace kiln::detail {

// The source of unit `unit` of `catalog`: its translation unit, options, kernels and the headers it
// includes, from the catalog's bundle, in memory.
UnitSource unit_source(const Catalog& catalog, std::uint32_t unit);

// The request that compiles `unit` for `arch`: its fields and the target.
CompileRequest make_request(UnitSource unit, unsigned arch);
// The request that compiles unit `unit` of `catalog` for `arch` (make_request of its unit_source).
CompileRequest make_request(const Catalog& catalog, std::uint32_t unit, unsigned arch);

// A part of a unit's request (docs/DESIGN.md, "A unit's kernels over several workers"): the same source,
// options and headers with only the kernels at `kernels` (indices into `unit`'s, in their order) and
// their name expressions. NVRTC instantiates a table unit's kernels only through its name expressions
// (templates/unit.cu.j2), so a part's compile makes those kernels, each as the whole unit's compile
// makes it, and no other. Fails for an index the unit does not have, for no index, or one given twice.
Result<CompileRequest> part_request(const CompileRequest& unit, const std::vector<std::size_t>& kernels);

// The key parts (chain/key_parts.hpp) of unit `unit` of `catalog`, as make_request gathers them: what
// build_unit records in the entries it makes, and `kiln why` compares a miss's nearest entry with.
std::vector<KeyPart> unit_key_parts(const Catalog& catalog, std::uint32_t unit);

// The PCH family of a request whose unit source has `headers_digest` (UnitSource::headers_digest), with
// its file in `cache` (empty when the cache is not usable).
PchFamily request_family(const CompileRequest& request, std::string_view headers_digest, const DiskCache& cache);

// How long compiling unit `unit` of `catalog` takes on one thread, roughly: from the bytes of the headers
// it includes and of the code it makes (an embedded binary of another architecture), with `from_ptx`
// the PTX tier's assembly alone. Only ever compared with other estimates: the pool takes the longest
// compile first and gives it threads where it would finish last (docs/DESIGN.md, "Scheduling a table").
double compile_estimate_ms(const Catalog& catalog, std::uint32_t unit, bool from_ptx = false);
// Of that estimate, what every part of the unit pays again when it is compiled in parts (its fixed cost
// and its headers' parse); the rest, its code, the parts share.
double compile_shared_ms(const Catalog& catalog, std::uint32_t unit);

// The estimate the JIT pool gets for unit `unit`: the time its last compile took by the history of the
// cache directory `cache_root` (jit/compile_history.hpp; any architecture), else compile_estimate_ms.
double unit_estimate_ms(const Catalog& catalog, std::uint32_t unit, const std::filesystem::path& cache_root);

// compile_estimate_ms of a unit with no embedded binary to size (a program given at run time, a JIT-only
// unit): from its source's and headers' bytes, its name expressions, and whether it includes CCCL.
double source_estimate_ms(const Catalog& catalog, std::uint32_t unit);
// The same of a unit source (a program given at run time).
double source_estimate_ms(const UnitSource& unit);
// Each kernel's share of unit `unit`'s code, in make_request's order, summing to 1: its function's bytes
// in the unit's embedded cubin of the newest architecture. Empty where the unit embeds no cubin, or the
// cubin does not size every kernel (the JIT pool's cost of parts then cannot be told: UnitSplit).
std::vector<double> kernel_code_shares(const Catalog& catalog, std::uint32_t unit);

// `units` of `catalog`, the longest compile first (compile_estimate_ms; ties keep their order): the order
// in which kiln::precompile and warm-up hand them to the pool.
std::vector<std::uint32_t> longest_first(const Catalog& catalog, std::vector<std::uint32_t> units);

}  // namespace kiln::detail
