// Kernel lookup in a generated catalog, and its images read out of their fatbins.
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>

#include "base/fatbin.hpp"

#include <algorithm>

namespace kiln {

const KernelEntry* Catalog::find(std::string_view name) const noexcept {
  // The generator sorts kernels by name (byte order), so a lower bound finds the only candidate.
  const auto it = std::lower_bound(kernels.begin(), kernels.end(), name,
                                   [this](const KernelEntry& k, std::string_view n) { return str(k.name) < n; });
  if (it == kernels.end() || str(it->name) != name) return nullptr;
  return &*it;
}

std::string Catalog::image(const BinaryEntry& b) const {
  auto bytes = detail::embedded_image(*this, b);
  if (!bytes) throw Error(Errc::catalog, "kiln: " + bytes.error());
  return std::move(bytes).value();
}

}  // namespace kiln
