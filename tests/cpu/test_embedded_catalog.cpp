// The examples catalog as built: every unit's images in standard, compressed fatbins where cuobjdump reads
// them, each where the table says, for the architecture it claims, defining every kernel of its unit; and
// what the fatbin reader refuses.
#include <doctest/doctest.h>

#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/select.hpp>

#include "examples_catalog.hpp"
#include "fatbin_checks.hpp"
#include "text_util.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace {

// A copy of the examples catalog over a copy of its fatbins, to damage.
struct CatalogCopy {
  std::vector<unsigned char> blobs;
  kiln::Catalog catalog;

  CatalogCopy() : blobs(original().blobs, original().blobs + original().blobs_size), catalog(original()) {
    catalog.blobs = blobs.data();
  }
  static const kiln::Catalog& original() { return kiln::examples::catalog(); }

  const kiln::BinaryEntry& first(kiln::BinaryKind kind) const {
    for (const auto& b : catalog.binaries)
      if (b.kind == kind) return b;
    FAIL("no binary of that kind");
    return catalog.binaries.front();
  }
  template <typename T>
  void poke(std::size_t offset, T value) {
    std::memcpy(blobs.data() + offset, &value, sizeof(T));
  }
  std::string why(const kiln::BinaryEntry& b) const { return kiln::detail::embedded_image(catalog, b).error(); }
};

using kiln::test::contains;

}  // namespace

TEST_CASE("every unit's fatbins hold a cubin for every configured architecture, then PTX for the newest, apart") {
  kiln::test::check_coverage(kiln::examples::catalog(), KILN_TEST_EMBED_PTX);
}

TEST_CASE("every image is stored zstd-compressed, smaller than it loads") {
  const auto [stored, loaded] = kiln::test::check_compressed(kiln::examples::catalog());
  MESSAGE("examples: images " << stored << " bytes embedded, " << loaded << " unpacked");
  CHECK(stored < loaded);
}

TEST_CASE("every cubin's ELF header names its architecture, and every kernel is a symbol in it") {
  kiln::test::check_images(kiln::examples::catalog());
}

TEST_CASE("the fatbins lie in the program's .nv_fatbin section, which reads as fatbins back to back") {
  kiln::test::check_in_fatbin_section(kiln::examples::catalog(), "/proc/self/exe");
}

TEST_CASE("the table is consistent: names sorted and unique, references in bounds, fatbins back to back") {
  const kiln::Catalog& c = kiln::examples::catalog();
  CHECK(c.name == "examples");
  for (std::size_t i = 1; i < c.kernels.size(); ++i) CHECK(c.str(c.kernels[i - 1].name) < c.str(c.kernels[i].name));
  std::size_t covered = 0, fatbins_end = 0;
  for (const auto& unit : c.units) {
    CHECK(unit.first_binary == covered);
    covered += unit.binary_count;
    CHECK(unit.fatbins.offset == fatbins_end);  // no padding: cuobjdump walks from one to the next
    CHECK(unit.fatbins.size % 8 == 0);
    fatbins_end += unit.fatbins.size;
  }
  CHECK(fatbins_end == c.blobs_size);
  CHECK(reinterpret_cast<std::uintptr_t>(c.blobs) % 8 == 0);
  CHECK(covered == c.binaries.size());
  for (const auto& b : c.binaries) CHECK(b.offset + b.stored_size < c.blobs_size);
  for (const auto& k : c.kernels) {
    CHECK(k.unit < c.units.size());
    CHECK(c.find(c.str(k.name)) == &k);
  }
  // The example table's three kinds of row.
  CHECK(c.str(c.find("vector_add")->lowered) == "vector_add");
  CHECK(c.str(c.find("scale_f64")->expression) == "kiln_examples::scale<double>");
  CHECK(c.str(c.find("block_sum_f32")->lowered) == "_ZN13kiln_examples9block_sumIfLi256EEEvPKT_PS1_i");
}

TEST_CASE("an image whose fatbin entry is not what the table says is refused, with the reason") {
  CatalogCopy copy;
  const kiln::BinaryEntry& b = copy.first(kiln::BinaryKind::cubin);
  REQUIRE(kiln::detail::embedded_image(copy.catalog, b).ok());

  SUBCASE("another architecture") {
    copy.poke<std::uint32_t>(b.offset + 28, b.arch + 1);
    CHECK(contains(copy.why(b), "not what the catalog says"));
  }
  SUBCASE("PTX where a cubin should be") {
    copy.poke<std::uint16_t>(b.offset, 1);
    CHECK(contains(copy.why(b), "not what the catalog says"));
  }
  SUBCASE("an unknown kind") {
    copy.poke<std::uint16_t>(b.offset, 7);
    CHECK(contains(copy.why(b), "of kind 7"));
  }
  SUBCASE("compressed in another form (no zstd flag)") {
    std::uint64_t flags = 0;
    std::memcpy(&flags, copy.blobs.data() + b.offset + 40, sizeof flags);
    copy.poke<std::uint64_t>(b.offset + 40, flags & ~kiln::detail::kFatbinFlagZstd);
    CHECK(contains(copy.why(b), "compressed in a form kiln does not read"));
  }
  SUBCASE("a payload running past the blob") {
    copy.poke<std::uint64_t>(b.offset + 8, std::uint64_t{1} << 40);
    CHECK(contains(copy.why(b), "overruns its fatbin"));
  }
  SUBCASE("a frame that is not zstd") {
    std::uint32_t header_size = 0;
    std::memcpy(&header_size, copy.blobs.data() + b.offset + 4, sizeof header_size);
    copy.poke<std::uint32_t>(b.offset + header_size, 0x12345678);
    CHECK(contains(copy.why(b), "not a zstd frame"));
  }
  // The public reader throws the reason as an Error with its code.
  try {
    (void)copy.catalog.image(b);
    FAIL("a damaged image was read");
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::catalog);
    CHECK(contains(e.what(), "registry 'examples'"));
    CHECK(contains(e.what(), "sm_" + std::to_string(b.arch)));
  }
}

TEST_CASE("an LTO-IR image in fatbinary's own encoding is read as such: handed over in its fatbin, never unpacked") {
  // The examples embed no LTO-IR: the first image of a container is made one (kind 8, flag 0x10000), as
  // fatbinary stores a linked row's (docs/DESIGN.md, "Embedded fatbins"), and the table says so.
  CatalogCopy copy;
  std::vector<kiln::BinaryEntry> binaries(copy.catalog.binaries.begin(), copy.catalog.binaries.end());
  copy.catalog.binaries = binaries;
  const kiln::UnitEntry& unit = copy.catalog.units.front();
  kiln::BinaryEntry& b = binaries[unit.first_binary];  // its cubins' fatbin's first image
  REQUIRE(b.offset == unit.fatbins.offset + 16);
  std::uint64_t flags = 0;
  std::memcpy(&flags, copy.blobs.data() + b.offset + 40, sizeof flags);
  copy.poke<std::uint16_t>(b.offset, 8);
  copy.poke<std::uint64_t>(b.offset + 40, flags | kiln::detail::kFatbinFlagLto);
  b.kind = kiln::BinaryKind::ltoir;
  b.compression = kiln::Compression::lto;

  const auto image = kiln::detail::read_fatbin_image({copy.blobs.data(), copy.blobs.size()}, b.offset);
  REQUIRE_MESSAGE(image.ok(), image.error());
  CHECK(image->kind == kiln::BinaryKind::ltoir);
  CHECK(image->compression == kiln::Compression::lto);
  CHECK(kiln::binary_label(b) == "lto_" + std::to_string(b.arch));
  CHECK(contains(copy.why(b), "which only nvJitLink reads"));

  const auto images = kiln::detail::read_fatbins(copy.catalog.fatbins_of(unit));
  REQUIRE(images.ok());
  std::size_t in_first = 0;
  for (const auto& i : *images) in_first += i.container == 0;
  const auto fatbin = kiln::detail::embedded_image_fatbin(copy.catalog, b);
  REQUIRE_MESSAGE(fatbin.ok(), fatbin.error());
  CHECK(fatbin->size() == 16 + image->header_size + image->padded_size);
  if (in_first == 1) {
    // Alone in its fatbin (as kiln-gen packs LTO-IR): that fatbin, header and all, as nvJitLink takes it.
    CHECK(std::memcmp(fatbin->data(), copy.blobs.data() + unit.fatbins.offset, fatbin->size()) == 0);
  }
  // Never with other images nvJitLink would choose among: that one alone.
  const auto read = kiln::detail::read_fatbins({reinterpret_cast<const unsigned char*>(fatbin->data()), fatbin->size()});
  REQUIRE_MESSAGE(read.ok(), read.error());
  REQUIRE(read->size() == 1);
  CHECK(read->front().kind == kiln::BinaryKind::ltoir);
  CHECK(read->front().arch == b.arch);
}

TEST_CASE("a cubin packed for the driver is a fatbin of that image alone, still compressed, as the table says") {
  // The examples' cubins of several archs share one fatbin: each comes out alone, its entry as stored.
  const kiln::Catalog& c = kiln::examples::catalog();
  for (const kiln::BinaryEntry& b : c.binaries) {
    if (b.kind != kiln::BinaryKind::cubin) continue;
    CAPTURE(kiln::binary_label(b));
    const auto fatbin = kiln::detail::embedded_image_fatbin(c, b);
    REQUIRE_MESSAGE(fatbin.ok(), fatbin.error());
    const auto read = kiln::detail::read_fatbins({reinterpret_cast<const unsigned char*>(fatbin->data()), fatbin->size()});
    REQUIRE_MESSAGE(read.ok(), read.error());
    REQUIRE(read->size() == 1);
    const kiln::detail::FatbinImage& image = read->front();
    CHECK(image.kind == kiln::BinaryKind::cubin);
    CHECK(image.arch == b.arch);
    CHECK(image.compression == kiln::Compression::zstd);
    CHECK(image.payload.size() == b.stored_size);
    const auto unpacked = kiln::detail::unpack(image);
    REQUIRE_MESSAGE(unpacked.ok(), unpacked.error());
    CHECK(*unpacked == c.image(b));  // what the driver unpacks is the cubin kiln would hand it
  }
  // A frame that does not state the table's size is refused before the driver sees it.
  CatalogCopy copy;
  const kiln::BinaryEntry& b = copy.first(kiln::BinaryKind::cubin);
  std::uint32_t header_size = 0;
  std::memcpy(&header_size, copy.blobs.data() + b.offset + 4, sizeof header_size);
  copy.poke<std::uint32_t>(b.offset + header_size, 0x12345678);
  const auto refused = kiln::detail::embedded_image_fatbin(copy.catalog, b);
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.error(), "is damaged"));
  CHECK(contains(refused.error(), "not a zstd frame"));
}

TEST_CASE("a zstd frame cut short is refused, not decompressed in part") {
  const kiln::Catalog& c = kiln::examples::catalog();
  const kiln::BinaryEntry& b = c.binaries.front();
  auto image = kiln::detail::read_fatbin_image({c.blobs, c.blobs_size}, b.offset);
  REQUIRE(image.ok());
  REQUIRE(kiln::detail::unpack(*image).ok());
  image->payload = image->payload.first(image->payload.size() / 2);
  const auto cut = kiln::detail::unpack(*image);
  REQUIRE_FALSE(cut.ok());
  CHECK(contains(cut.error(), "zstd"));
}

TEST_CASE("the fatbin reader refuses stray bytes, another magic, and a container claiming more than follows") {
  const kiln::Catalog& c = kiln::examples::catalog();
  const auto& unit = c.units.front();
  std::vector<unsigned char> bytes(c.fatbins_of(unit).begin(), c.fatbins_of(unit).end());
  REQUIRE(kiln::detail::read_fatbins(bytes).ok());

  auto stray = bytes;
  stray.resize(bytes.size() + 8, 0);
  CHECK(kiln::detail::read_fatbins(stray).error().find("stray bytes") != std::string::npos);
  auto magic = bytes;
  magic[0] ^= 1;
  CHECK(kiln::detail::read_fatbins(magic).error().find("no fatbin at byte 0") != std::string::npos);
  auto cut = bytes;
  cut.resize(bytes.size() - 8);
  CHECK(kiln::detail::read_fatbins(cut).error().find("claims more bytes than follow") != std::string::npos);
  CHECK(kiln::detail::read_fatbins({}).ok());
}
