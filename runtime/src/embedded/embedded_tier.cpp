// The embedded tier: the cubin built for this device, read out of the unit's fatbin in the binary.
#include "embedded/embedded_tier.hpp"

#include "base/fatbin.hpp"
#include "base/warn_once.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

// What the kernel's error says first when no tier has its unit: what is embedded, and what to do.
std::string embedded_miss(const UnitQuery& q) {
  if (q.link != nullptr) return "";  // a linked unit is never embedded: its run-time code is what it needs
  if (q.options.use_embedded) return no_binary_message(q.catalog, q.kernel, q.arch, q.options.allow_ptx);
  return "kiln: no binary for kernel '" + std::string(q.catalog.str(q.kernel.name)) + "' on sm_" +
         std::to_string(q.arch) + ": the embedded tier is off (RegistryOptions::use_embedded)";
}

// Chosen from the catalog's table alone, before anything is read: the image the GPU will run is known
// without asking the driver (docs/DESIGN.md, "Embedded fatbins").
const BinaryEntry* cubin(const UnitQuery& q) {
  // A linked unit is built with its run-time code: nothing embedded serves it.
  return q.options.use_embedded && q.link == nullptr ? select_binary(q.catalog, q.unit(), q.arch, false) : nullptr;
}

WarnOnce& warnings() {
  static WarnOnce once;
  return once;
}

Result<Origin> probe_embedded_cubin(const UnitQuery& q) {
  if (const BinaryEntry* b = cubin(q)) return Origin{Tier::embedded, b->arch, false};
  return fail(embedded_miss(q));
}

// The selected image as the driver gets it, kept by the registry for the library's life: unpacked
// (`unpacked`, or an image stored as it is), else in a fatbin of its own, still compressed, for the driver
// to unpack as it loads it.
Result<UnitImage> embedded_cubin(const UnitQuery& q, bool unpacked) {
  const BinaryEntry* b = cubin(q);
  if (b == nullptr) return fail(embedded_miss(q));
  const bool packed = !unpacked && b->compression == Compression::zstd;
  auto bytes = packed ? embedded_image_fatbin(q.catalog, *b) : embedded_image(q.catalog, *b);
  if (!bytes) {
    // A build whose table and fatbins disagree: a miss, so that the other tiers can serve, said once.
    warnings().warn("damaged", bytes.error() + "; loading its units from the other tiers");
    return fail(bytes.error());
  }
  UnitImage image;
  image.source = Tier::embedded;
  image.arch = b->arch;
  image.label = binary_label(*b);
  image.owned = std::move(bytes).value();
  image.packed = packed;
  return image;
}

// A get()'s own fetch: the cubin packed, since the driver unpacks it on this thread for less than libzstd
// does on a thread that has not unpacked before (docs/DESIGN.md, "Embedded fatbins").
Result<UnitImage> fetch_embedded_cubin(const UnitQuery& q) { return embedded_cubin(q, q.unpack); }

// Read ahead on the prefetch's thread: unpacked there, so the load that takes it only loads.
Result<UnitImage> unpack_embedded_cubin(const UnitQuery& q) { return embedded_cubin(q, true); }

}  // namespace

// Read ahead as a get() reads it: nothing is counted for an embedded cubin.
TierStep embedded_tier() {
  return TierStep{Tier::embedded, probe_embedded_cubin, fetch_embedded_cubin, unpack_embedded_cubin, nullptr, nullptr};
}

}  // namespace kiln::detail
