// The embedded tier: the cubin built for this device into the binary.
#include "registry/tier.hpp"

#include <kiln/select.hpp>

namespace kiln::detail {

namespace {

UnitProbe probe_of(const BinaryEntry& binary) { return {Tier::embedded, binary.arch, false}; }

UnitImage image_of(const UnitQuery& q, const BinaryEntry& binary) {
  UnitImage image;
  image.source = Tier::embedded;
  image.arch = binary.arch;
  image.label = binary_label(binary);
  image.embedded = q.catalog.bytes(binary);
  return image;
}

// What the kernel's error says first when no tier has its unit: what is embedded, and what to do.
std::string embedded_miss(const UnitQuery& q) {
  if (q.options.use_embedded) return no_binary_message(q.catalog, q.kernel, q.arch, q.options.allow_ptx);
  return "kiln: no binary for kernel '" + std::string(q.catalog.str(q.kernel.name)) + "' on sm_" +
         std::to_string(q.arch) + ": the embedded tier is off (RegistryOptions::use_embedded)";
}

const BinaryEntry* cubin(const UnitQuery& q) {
  return q.options.use_embedded ? select_binary(q.catalog, q.unit(), q.arch, false) : nullptr;
}

}  // namespace

Result<UnitProbe> probe_embedded_cubin(const UnitQuery& q) {
  if (const BinaryEntry* b = cubin(q)) return probe_of(*b);
  return fail(embedded_miss(q));
}

Result<UnitImage> fetch_embedded_cubin(const UnitQuery& q) {
  if (const BinaryEntry* b = cubin(q)) return image_of(q, *b);
  return fail(embedded_miss(q));
}

}  // namespace kiln::detail
