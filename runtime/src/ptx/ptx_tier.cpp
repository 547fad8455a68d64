// The PTX tier: embedded PTX the GPU can run, assembled by kiln itself (nvJitLink, unreferenced globals
// stripped, in the worker pool) and published to the disk cache; never handed to the driver's JIT.
#include "registry/tier.hpp"

#include "base/fatbin.hpp"
#include "disk/unit_key.hpp"
#include "jit/jit_tier.hpp"
#include "remote/remote_tier.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

// The embedded PTX of the highest architecture not above the device's, when the caller allows PTX.
const BinaryEntry* usable_ptx(const UnitQuery& q) {
  if (!q.options.allow_ptx) return nullptr;
  const BinaryEntry* b = select_binary(q.catalog, q.unit(), q.arch, true);
  return b != nullptr && b->kind == BinaryKind::ptx ? b : nullptr;
}

}  // namespace

// The binary's arch is the PTX's: its code, CUB's policies included, is that architecture's, and a plan
// picks its launch policies by it (docs/DESIGN.md, "The PTX tier"). A binary an earlier process assembled
// from the same PTX is on disk under the PTX's own key (its code= line), which the disk tier's probe does
// not ask for: get() would read it from there, so the plan says disk.
Result<UnitProbe> probe_ptx(const UnitQuery& q) {
  const BinaryEntry* b = usable_ptx(q);
  if (b == nullptr) return fail("");
  if (q.cache().usable() && q.cache().contains(unit_cache_key(q.catalog, q.unit(), q.arch, q.cache(), b->arch))) {
    return UnitProbe{Tier::disk, b->arch, true};
  }
  return UnitProbe{Tier::ptx, b->arch, true};
}

Result<UnitImage> fetch_ptx(const UnitQuery& q) {
  const BinaryEntry* b = usable_ptx(q);
  if (b == nullptr) return fail("");
  // The PTX image out of the unit's PTX fatbin; a damaged one is a miss (the JIT compiles the source).
  auto ptx = embedded_image(q.catalog, *b);
  if (!ptx) return fail(ptx.error());
  BuiltUnit built =
      build_into_cache(q.catalog, q.unit_index(), q.arch, q.cache(), remote_of(q.options), *ptx, b->arch);
  UnitImage image;
  // disk: another process built it meanwhile; remote: another machine did
  image.source = built.compiled ? Tier::ptx : built.from_remote ? Tier::remote : Tier::disk;
  image.arch = b->arch;
  image.ptx = true;
  image.owned = std::move(built.entry.cubin);
  image.cache_key = std::move(built.key);
  image.label = "sm_" + std::to_string(q.arch) + " assembled from the embedded " + binary_label(*b);
  return image;
}

}  // namespace kiln::detail
