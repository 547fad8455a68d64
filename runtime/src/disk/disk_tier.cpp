// The disk tier: the cache's entry for this unit and architecture, validated, and checked against the catalog.
#include "disk/disk_tier.hpp"

#include "disk/cache_internal.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

std::string not_in_use(const DiskCache& cache) { return "the disk cache is not in use (" + cache.unusable_reason().message + ")"; }

Result<Origin> probe_disk(const UnitQuery& q) {
  if (!q.cache().usable()) return fail(not_in_use(q.cache()));
  const CacheKey key = q.key();
  if (q.cache().contains(key)) return Origin{Tier::disk, q.arch, false};  // a probe: read when asked for
  return fail("the disk cache " + q.cache().config().dir.string() + " has no entry for it (key " + key.hex + ")");
}

// The unit's entry under its key, read by `load` (which says what is counted), as the chain hands it over.
Result<UnitImage> disk_image(const UnitQuery& q, Result<CacheEntry> (*load)(DiskCache&, const CacheKey&, const EntryCheck&)) {
  if (!q.cache().usable()) return fail(not_in_use(q.cache()));
  CacheKey key = q.key();
  // An entry that is not this unit's (entry_serves_unit) is deleted and counted, as a corrupt one is.
  Result<CacheEntry> cached =
      load(q.cache(), key, [&](const CacheEntry& e) { return entry_serves_unit(q.catalog, q.unit_index(), e); });
  if (!cached) {
    return fail("the disk cache " + q.cache().config().dir.string() + " has no usable entry for it (key " + key.hex +
                ": " + cached.error() + ")");
  }
  UnitImage image;
  image.source = Tier::disk;
  image.arch = q.arch;
  image.take(std::move(*cached));
  image.cache_key = std::move(key.hex);
  image.label = binary_label(BinaryKind::cubin, q.arch) + " from the disk cache (" + image.cache_key + ")";
  return image;
}

Result<UnitImage> fetch_disk(const UnitQuery& q) { return disk_image(q, load_checked); }
// Read ahead of a get(), counting neither the miss (the chain counts its own when it asks) nor the hit,
// which served() counts once the image serves a get().
Result<UnitImage> read_disk_ahead(const UnitQuery& q) { return disk_image(q, read_ahead_checked); }
void count_disk_hit(const UnitQuery& q) { count_hit(q.cache()); }

}  // namespace

TierStep disk_tier() { return TierStep{Tier::disk, probe_disk, fetch_disk, read_disk_ahead, count_disk_hit, nullptr}; }

}  // namespace kiln::detail
