// The PTX tier: embedded PTX the GPU can run, assembled by kiln itself (nvJitLink, unreferenced globals
// stripped, on the JIT tier's worker pool: so it lives beside the JIT) and published to the stores as the
// JIT's builds are; never handed to the driver's JIT.
#include "base/fatbin.hpp"
#include "jit/build.hpp"
#include "jit/jit_tier.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

// The embedded PTX of the highest architecture not above the device's, when the caller allows PTX.
const BinaryEntry* usable_ptx(const UnitQuery& q) {
  if (!q.options.allow_ptx || q.link != nullptr) return nullptr;
  return select_ptx(q.catalog, q.unit(), q.arch);
}

// The binary's arch is the PTX's: its code, CUB's policies included, is that architecture's, and a plan
// picks its launch policies by it (docs/DESIGN.md, "The PTX tier"). A binary an earlier process assembled
// from the same PTX is on disk under the PTX's own key (its code= line), which the disk tier's probe does
// not ask for: get() would read it from there, so the plan says disk.
Result<Origin> probe_ptx(const UnitQuery& q) {
  const BinaryEntry* b = usable_ptx(q);
  if (b == nullptr) return fail("");
  if (q.cache().usable() && q.cache().contains(q.key(b->arch))) return Origin{Tier::disk, b->arch, true};
  return Origin{Tier::ptx, b->arch, true};
}

Result<UnitImage> fetch_ptx(const UnitQuery& q) {
  const BinaryEntry* b = usable_ptx(q);
  if (b == nullptr) return fail("");
  // The PTX image out of the unit's PTX fatbin; a damaged one is a miss (the JIT compiles the source).
  auto ptx = embedded_image(q.catalog, *b);
  if (!ptx) return fail(ptx.error());
  // disk: another process built it meanwhile; remote: another machine did
  UnitImage image = build_unit(q, BuildInput{Tier::ptx, *ptx, b->arch});
  image.arch = b->arch;
  image.ptx = true;
  image.label = "sm_" + std::to_string(q.arch) + " assembled from the embedded " + binary_label(*b);
  return image;
}

}  // namespace

TierStep ptx_tier() { return TierStep{Tier::ptx, probe_ptx, fetch_ptx, nullptr, nullptr, nullptr}; }

}  // namespace kiln::detail
