// The examples catalog as built: every binary is where the table says,
// is for the architecture it claims, and defines every kernel of its unit under the recorded lowered name.
#include <doctest/doctest.h>

#include <kiln/catalog.hpp>
#include <kiln/select.hpp>

#include "base/cubin_elf.hpp"  // runtime/src: the reader the disk cache vets entries with
#include "examples_catalog.hpp"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

namespace {

// KILN_TEST_ARCHS: the build's -Darchs as "75,80,..."; KILN_TEST_EMBED_PTX: -Dembed_ptx.
std::vector<unsigned> configured_archs() {
  std::vector<unsigned> archs;
  std::stringstream in(KILN_TEST_ARCHS);
  for (std::string a; std::getline(in, a, ',');) archs.push_back(static_cast<unsigned>(std::stoul(a)));
  std::sort(archs.begin(), archs.end());
  return archs;
}

}  // namespace

TEST_CASE("every unit embeds a cubin for every configured architecture, then PTX for the newest") {
  const kiln::Catalog& c = kiln::examples::catalog();
  const auto archs = configured_archs();
  REQUIRE_FALSE(c.units.empty());
  for (const auto& unit : c.units) {
    CAPTURE(c.str(unit.name));
    std::vector<unsigned> cubins;
    std::vector<unsigned> ptx;
    for (const auto& b : c.binaries_of(unit)) (b.kind == kiln::BinaryKind::cubin ? cubins : ptx).push_back(b.arch);
    CHECK(cubins == archs);
    if (KILN_TEST_EMBED_PTX) {
      CHECK(ptx == std::vector<unsigned>{archs.back()});
    } else {
      CHECK(ptx.empty());
    }
  }
}

TEST_CASE("every cubin's ELF header names its architecture, and every kernel is a symbol in it") {
  const kiln::Catalog& c = kiln::examples::catalog();
  for (const auto& kernel : c.kernels) {
    const auto& unit = c.units[kernel.unit];
    for (const auto& b : c.binaries_of(unit)) {
      CAPTURE(c.str(kernel.name));
      CAPTURE(kiln::binary_label(b));
      const auto bytes = c.bytes(b);
      if (b.kind == kiln::BinaryKind::cubin) {
        const auto cubin = kiln::detail::read_cubin(bytes);  // checks ELF64 and EM_CUDA
        REQUIRE_MESSAGE(cubin.ok(), cubin.error);
        CHECK(cubin.arch == b.arch);
        CHECK(cubin.defines(c.str(kernel.lowered)));
      } else {
        const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        CHECK(c.blobs[b.offset + b.size] == 0);  // NUL-terminated for cuLibraryLoadData
        CHECK(text.find(".target sm_" + std::to_string(b.arch)) != std::string_view::npos);
        CHECK(text.find(".entry " + std::string(c.str(kernel.lowered))) != std::string_view::npos);
      }
    }
  }
}

TEST_CASE("the table is consistent: names sorted and unique, references in bounds, blobs aligned") {
  const kiln::Catalog& c = kiln::examples::catalog();
  CHECK(c.name == "examples");
  for (std::size_t i = 1; i < c.kernels.size(); ++i) CHECK(c.str(c.kernels[i - 1].name) < c.str(c.kernels[i].name));
  std::size_t covered = 0;
  for (const auto& unit : c.units) {
    CHECK(unit.first_binary == covered);
    covered += unit.binary_count;
  }
  CHECK(covered == c.binaries.size());
  for (const auto& b : c.binaries) {
    CHECK(b.offset % 64 == 0);
    CHECK(b.offset + b.size < c.blobs_size);
    CHECK(reinterpret_cast<std::uintptr_t>(c.blobs + b.offset) % 64 == 0);
  }
  for (const auto& k : c.kernels) {
    CHECK(k.unit < c.units.size());
    CHECK(c.find(c.str(k.name)) == &k);
  }
  // The example table's three kinds of row.
  CHECK(c.str(c.find("vector_add")->lowered) == "vector_add");
  CHECK(c.str(c.find("scale_f64")->expression) == "kiln_examples::scale<double>");
  CHECK(c.str(c.find("block_sum_f32")->lowered) == "_ZN13kiln_examples9block_sumIfLi256EEEvPKT_PS1_i");
}
