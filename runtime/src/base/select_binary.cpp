// Picks the embedded binary for a device and words the errors when none fits.
#include <kiln/select.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

namespace kiln {
namespace {

std::string sm_label(unsigned arch) { return "sm_" + std::to_string(arch); }

// The image of `kind` of `unit` with the highest architecture not above the device's, or nullptr.
const BinaryEntry* best_below(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch,
                              BinaryKind kind) noexcept {
  const BinaryEntry* best = nullptr;
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == kind && b.arch <= device_arch && (!best || b.arch > best->arch)) best = &b;
  }
  return best;
}

const BinaryEntry* best_ptx(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch) noexcept {
  return best_below(catalog, unit, device_arch, BinaryKind::ptx);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

}  // namespace

const BinaryEntry* select_binary(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch,
                                 bool allow_ptx) noexcept {
  // A cubin runs on its own major version at an equal or higher minor (sm_80 on sm_86), never across majors.
  const BinaryEntry* best = nullptr;
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind != BinaryKind::cubin || b.arch / 10 != device_arch / 10 || b.arch > device_arch) continue;
    if (!best || b.arch > best->arch) best = &b;
  }
  if (best) return best;
  return allow_ptx ? best_ptx(catalog, unit, device_arch) : nullptr;
}

const BinaryEntry* select_ptx(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch) noexcept {
  return best_ptx(catalog, unit, device_arch);
}

const BinaryEntry* select_lto_ir(const Catalog& catalog, const UnitEntry& unit, unsigned device_arch) noexcept {
  return best_below(catalog, unit, device_arch, BinaryKind::ltoir);
}

std::string binary_label(const BinaryEntry& binary) { return binary_label(binary.kind, binary.arch); }

std::string binary_label(BinaryKind kind, unsigned arch) {
  return (kind == BinaryKind::cubin ? "sm_" : kind == BinaryKind::ptx ? "compute_" : "lto_") + std::to_string(arch);
}

std::string embedded_labels(const Catalog& catalog, const UnitEntry& unit) {
  std::string labels;
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (!labels.empty()) labels += ' ';
    labels += binary_label(b);
  }
  return labels;
}

std::string no_binary_message(const Catalog& catalog, const KernelEntry& kernel, unsigned device_arch,
                              bool allow_ptx) {
  const UnitEntry& unit = catalog.units[kernel.unit];
  const std::string embedded = embedded_labels(catalog, unit);
  std::string archs;  // the cubin architectures already built, for the -Darchs advice
  for (const BinaryEntry& b : catalog.binaries_of(unit)) {
    if (b.kind == BinaryKind::cubin) archs += binary_label(b) + ",";
  }
  std::string message = "kiln: no binary of kernel '" + std::string(catalog.str(kernel.name)) + "' (unit '" +
                        std::string(catalog.str(unit.name)) + "', registry '" + std::string(catalog.name) +
                        "') runs on this device (" + sm_label(device_arch) + "); embedded: " +
                        (embedded.empty() ? "nothing" : embedded) + ". Rebuild kiln with -Darchs=" + archs +
                        sm_label(device_arch);
  if (const BinaryEntry* ptx = best_ptx(catalog, unit, device_arch); ptx && !allow_ptx) {
    message += ", or let kiln assemble the embedded PTX " + binary_label(*ptx) + " (RegistryOptions::allow_ptx)";
  }
  return message;
}

std::string linked_unit_message(const Catalog& catalog, const KernelEntry& kernel) {
  return "kiln: kernel '" + std::string(catalog.str(kernel.name)) + "' of registry '" + std::string(catalog.name) +
         "' belongs to unit '" + std::string(catalog.str(catalog.units[kernel.unit].name)) +
         "', whose kernels call an operator given at run time (a linked row): nothing is built of it without "
         "one; get it with Registry::get(name, LinkedSource), as kiln::prim::ReduceWith and the other plans "
         "of kiln/prim/operator.hpp do";
}

std::string unknown_kernel_message(const Catalog& catalog, std::string_view name) {
  // Close enough to be a typo: one edit per three characters, rounded up ("scal_f32" -> "scale_f64" is 3).
  const std::size_t limit = std::max<std::size_t>(1, (name.size() + 2) / 3);
  std::vector<std::pair<std::size_t, std::string_view>> close;
  for (const KernelEntry& k : catalog.kernels) {
    const std::string_view known = catalog.str(k.name);
    if (const std::size_t d = edit_distance(name, known); d <= limit) close.emplace_back(d, known);
  }
  std::sort(close.begin(), close.end());
  close.resize(std::min<std::size_t>(close.size(), 3));

  std::string message = "kiln: no kernel '" + std::string(name) + "' in registry '" + std::string(catalog.name) + "'";
  if (close.empty()) {
    // The names themselves: `kiln list` knows only the registries its program links, maybe not this one.
    constexpr std::size_t shown = 8;
    message += " (it has " + std::to_string(catalog.kernels.size()) +
               (catalog.kernels.size() == 1 ? " kernel: " : " kernels: ");
    for (std::size_t i = 0; i < std::min(shown, catalog.kernels.size()); ++i)
      message += (i ? ", " : "") + std::string(catalog.str(catalog.kernels[i].name));
    if (catalog.kernels.size() > shown) message += ", and " + std::to_string(catalog.kernels.size() - shown) + " more";
    return message + ")";
  }
  message += "; closest: ";
  for (std::size_t i = 0; i < close.size(); ++i) {
    if (i) message += ", ";
    message += close[i].second;
  }
  return message;
}

}  // namespace kiln
