// Kernel lookup in a generated catalog.
#include <kiln/catalog.hpp>

#include <algorithm>

namespace kiln {

const KernelEntry* Catalog::find(std::string_view name) const noexcept {
  // The generator sorts kernels by name (byte order), so a lower bound finds the only candidate.
  const auto it = std::lower_bound(kernels.begin(), kernels.end(), name,
                                   [this](const KernelEntry& k, std::string_view n) { return str(k.name) < n; });
  if (it == kernels.end() || str(it->name) != name) return nullptr;
  return &*it;
}

}  // namespace kiln
