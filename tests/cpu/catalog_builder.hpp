// Builds small in-memory catalogs for tests, laid out as the generator lays them out.
#pragma once

#include <kiln/catalog.hpp>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test {

// Owns the tables a Catalog points into; keep the builder alive while the catalog is used.
class CatalogBuilder {
 public:
  struct Binary {
    unsigned arch;
    BinaryKind kind;
  };

  // Adds a unit with binaries given cubins-first by ascending arch, as the generator emits them. Returns its index.
  std::uint32_t unit(std::string_view name, std::initializer_list<Binary> binaries) {
    const auto first = static_cast<std::uint32_t>(binaries_.size());
    for (const Binary& b : binaries) {
      // Selection never reads the images: each binary gets one placeholder byte, and no fatbin.
      binaries_.push_back({.arch = b.arch,
                           .kind = b.kind,
                           .offset = static_cast<std::uint32_t>(binaries_.size()),
                           .size = 1,
                           .stored_size = 1,
                           .compression = Compression::none});
    }
    units_.push_back({.name = add(name),
                      .options = add("-O3"),
                      .fatbins = {.offset = 0, .size = 0},
                      .first_binary = first,
                      .binary_count = static_cast<std::uint32_t>(binaries.size()),
                      .digest = add("0123abcd"),
                      .source = add(""),
                      .first_header = 0,
                      .header_count = 0,
                      .source_name = add(std::string(name) + ".cu")});
    return static_cast<std::uint32_t>(units_.size() - 1);
  }

  // Adds a linked unit (`linked = true`): no binaries, its translation unit `source` compiled with `options`
  // (one per line) and linked with the code a LinkedSource gives. Returns its index.
  std::uint32_t linked_unit(std::string_view name, std::string_view source, std::string_view options) {
    const std::uint32_t u = unit(name, {});
    units_[u].source = add(source);
    units_[u].options = add(options);
    units_[u].linked = true;
    return u;
  }

  // A kernel named by its C++ name `expression` and its symbol `lowered`.
  void kernel(std::string_view name, std::uint32_t unit, std::string_view expression, std::string_view lowered) {
    kernels_.push_back({.name = add(name), .expression = add(expression), .lowered = add(lowered), .unit = unit});
  }

  void kernel(std::string_view name, std::uint32_t unit) {
    const std::string expression = "ns::" + std::string(name);
    const std::string lowered = "_Z" + std::to_string(name.size()) + std::string(name) + "v";
    kernels_.push_back({.name = add(name), .expression = add(expression), .lowered = add(lowered), .unit = unit});
  }

  Catalog build(std::string_view name) {
    std::sort(kernels_.begin(), kernels_.end(), [this](const KernelEntry& a, const KernelEntry& b) {
      return str(a.name) < str(b.name);
    });
    blobs_.assign(binaries_.size(), 0);
    return Catalog{.name = name,
                   .units = units_,
                   .kernels = kernels_,
                   .binaries = binaries_,
                   .strings = strings_.data(),
                   .blobs = blobs_.data(),
                   .blobs_size = blobs_.size(),
                   .cccl_version = "3.0.1",
                   .headers = {},
                   .unit_headers = {},
                   .header_bundle = nullptr,
                   .header_bundle_size = 0,
                   .header_bundle_raw_size = 0,
                   .header_bundle_digest = ""};
  }

 private:
  StrRef add(std::string_view s) {
    const StrRef ref{static_cast<std::uint32_t>(strings_.size()), static_cast<std::uint32_t>(s.size())};
    strings_ += s;
    return ref;
  }
  std::string_view str(StrRef r) const { return std::string_view(strings_).substr(r.offset, r.size); }

  std::string strings_;
  std::vector<UnitEntry> units_;
  std::vector<KernelEntry> kernels_;
  std::vector<BinaryEntry> binaries_;
  std::vector<unsigned char> blobs_;
};

constexpr CatalogBuilder::Binary sm(unsigned arch) { return {arch, BinaryKind::cubin}; }
constexpr CatalogBuilder::Binary compute(unsigned arch) { return {arch, BinaryKind::ptx}; }

}  // namespace kiln::test
