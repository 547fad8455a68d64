// The JIT tier's step in the chain: the unit compiled from its source (NVRTC + nvJitLink) on the worker
// pool, once across threads, processes and machines (jit/build.hpp), and published to the stores.
#include "jit/jit_tier.hpp"

#include "jit/build.hpp"
#include "jit/jit_pool.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {
namespace {

// Compiled on first get(), if NVRTC can be loaded then.
Result<Origin> probe_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  return Origin{Tier::jit, q.arch, false};
}

Result<UnitImage> fetch_jit(const UnitQuery& q) {
  if (!q.options.use_jit) return fail("");
  UnitImage image = build_unit(q);
  image.arch = q.arch;
  image.label = "sm_" + std::to_string(q.arch) + " compiled by the JIT tier";
  return image;
}

// The first worker started, its compilers loaded, while the registry's context comes up. The PTX tier
// assembles on the same workers.
void prepare_jit(const UnitQuery& q) {
  if (q.options.use_jit || q.options.allow_ptx) start_jit_workers(q.arch);
}

}  // namespace

TierStep jit_tier() { return TierStep{Tier::jit, probe_jit, fetch_jit, nullptr, nullptr, prepare_jit}; }

}  // namespace kiln::detail
