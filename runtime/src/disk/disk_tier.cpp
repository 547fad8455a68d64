// The disk tier: the cache's entry for this unit and architecture, validated, and checked against the catalog.
#include "registry/tier.hpp"

#include "disk/unit_key.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

std::string not_in_use(const DiskCache& cache) { return "the disk cache is not in use (" + cache.unusable_reason() + ")"; }

// Why an entry cannot serve the unit: it must name every kernel of the unit with the lowered name the
// catalog recorded (the key covers the source, so a mismatch is a foreign entry).
Status entry_matches(const Catalog& catalog, std::uint32_t unit, const CacheEntry& entry) {
  for (const KernelEntry& k : catalog.kernels) {
    if (k.unit != unit) continue;
    bool found = false;
    for (const CachedKernel& c : entry.kernels) found = found || (c.name == catalog.str(k.name) && c.lowered == catalog.str(k.lowered));
    if (!found) return fail("the entry lacks kernel '" + std::string(catalog.str(k.name)) + "'");
  }
  return ok();
}

}  // namespace

Result<UnitProbe> probe_disk(const UnitQuery& q) {
  if (!q.cache.usable()) return fail(not_in_use(q.cache));
  const CacheKey key = unit_cache_key(q.catalog, q.unit(), q.arch);
  if (q.cache.contains(key)) return UnitProbe{Tier::disk, q.arch, false};  // a probe: read when asked for
  return fail("the disk cache " + q.cache.config().dir.string() + " has no entry for it (key " + key.hex + ")");
}

Result<UnitImage> fetch_disk(const UnitQuery& q) {
  if (!q.cache.usable()) return fail(not_in_use(q.cache));
  CacheKey key = unit_cache_key(q.catalog, q.unit(), q.arch);
  std::optional<CacheEntry> cached = q.cache.load(key);
  const Status matches = cached ? entry_matches(q.catalog, q.unit_index(), *cached) : ok();
  if (!cached || !matches) {
    return fail("the disk cache " + q.cache.config().dir.string() + " has no usable entry for it (key " + key.hex +
                (matches ? "" : ": " + matches.error()) + ")");
  }
  UnitImage image;
  image.source = Tier::disk;
  image.arch = q.arch;
  image.owned = std::move(cached->cubin);
  image.cache_key = std::move(key.hex);
  image.label = binary_label(BinaryEntry{q.arch, BinaryKind::cubin, 0, 0}) + " from the disk cache (" + image.cache_key + ")";
  return image;
}

}  // namespace kiln::detail
