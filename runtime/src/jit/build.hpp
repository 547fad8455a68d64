// A unit built for the chain, once across the threads, processes and machines that share its stores.
//
// The steps, in the order build_unit takes them (jit/build.cpp, one function each):
//   1. claim    each store the query's options use, fastest first (the disk cache: the key's lock; the
//               remote cache: the fleet's lease); the first that has the entry serves it, and the stores
//               before it keep a copy (docs/DESIGN.md, "A build, step by step")
//   2. compile  on the process-wide pool: the unit's source (NVRTC + nvJitLink), an embedded PTX image
//               (the PTX tier), or the unit linked with the query's run-time code
//   3. check    the entry names every kernel of the unit as the catalog lowered them
//   4. publish  to every store claimed, the slowest first, releasing each hold
// Loading the cubin is the registry's.
#pragma once

#include "chain/tier.hpp"

#include <kiln/catalog.hpp>

#include <string_view>

namespace kiln::detail {

// What a build compiles, besides the query's unit.
struct BuildInput {
  Tier tier = Tier::jit;      // what a compile here is reported as: jit, or ptx for the PTX tier
  std::string_view ptx;       // the PTX tier: the text of the embedded PTX image it assembles
  unsigned ptx_arch = 0;      // and that image's architecture (its own key: CacheKeyFields::code_arch)
};

// The unit's image: another builder's (source disk or remote), or compiled here (source `in.tier`, with
// `stored` saying whether the disk cache kept it). Throws Error(compile) with the compiler's log, or
// Error(no_compiler), when it cannot be built.
UnitImage build_unit(const UnitQuery& q, const BuildInput& in = {});

}  // namespace kiln::detail
