// A registry's kernels by name, hashed (registry/name_index.hpp).
#include "registry/name_index.hpp"

#include <algorithm>
#include <bit>

namespace kiln::detail {

namespace {

constexpr std::uint32_t kEmpty = UINT32_MAX;

// FNV-1a, 64 bits: short names, no allocation, good enough spread for a table at most half full.
std::uint64_t hash_name(std::string_view name) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

NameIndex build_name_index(const Catalog& catalog) {
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(2 * catalog.kernels.size(), 2));
  NameIndex index(size, kEmpty);
  for (std::uint32_t k = 0; k < catalog.kernels.size(); ++k) {
    std::size_t slot = hash_name(catalog.str(catalog.kernels[k].name)) & (size - 1);
    while (index[slot] != kEmpty) slot = (slot + 1) & (size - 1);
    index[slot] = k;
  }
  return index;
}

const KernelEntry* find_by_name(const Catalog& catalog, const NameIndex& index, std::string_view name) noexcept {
  const std::size_t mask = index.size() - 1;
  for (std::size_t slot = hash_name(name) & mask;; slot = (slot + 1) & mask) {
    const std::uint32_t k = index[slot];
    if (k == kEmpty) return nullptr;
    if (catalog.str(catalog.kernels[k].name) == name) return &catalog.kernels[k];
  }
}

}  // namespace kiln::detail
