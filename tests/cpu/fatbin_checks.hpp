// Checks on a generated catalog's fatbins, shared by the examples' (test_cpu) and the primitives' tests
// (test_prim_catalog): arch coverage, every image compressed and readable, ELF arch and kernel symbols,
// cubins and PTX in separate fatbins, and the fatbins where cuobjdump reads them (`.nv_fatbin`).
#pragma once

#include <doctest/doctest.h>

#include <kiln/catalog.hpp>
#include <kiln/select.hpp>

#include "base/cubin_elf.hpp"  // runtime/src: the reader the disk cache vets entries with
#include "base/fatbin.hpp"     // runtime/src: the reader the embedded tier reads images with

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::test {

// KILN_TEST_ARCHS: the build's -Darchs as "75,80,...".
inline std::vector<unsigned> configured_archs() {
  std::vector<unsigned> archs;
  std::stringstream in(KILN_TEST_ARCHS);
  for (std::string a; std::getline(in, a, ',');) archs.push_back(static_cast<unsigned>(std::stoul(a)));
  std::sort(archs.begin(), archs.end());
  return archs;
}

// Every unit's images, as its fatbins list them, are the table's entries for the unit: a cubin for every
// configured architecture in the first fatbin, then (with embed_ptx) PTX for the newest in a second one;
// a linked unit's, LTO-IR for every configured architecture in a fatbin of its own.
inline void check_coverage(const Catalog& c, bool embed_ptx) {
  const auto archs = configured_archs();
  REQUIRE_FALSE(c.units.empty());
  for (const UnitEntry& unit : c.units) {
    CAPTURE(c.str(unit.name));
    const auto images = detail::read_fatbins(c.fatbins_of(unit));
    REQUIRE_MESSAGE(images.ok(), images.error());
    const auto table = c.binaries_of(unit);
    REQUIRE(images->size() == table.size());
    std::vector<unsigned> cubins, ptx, lto_ir;
    for (std::size_t i = 0; i < table.size(); ++i) {
      const BinaryEntry& b = table[i];
      const detail::FatbinImage& image = (*images)[i];
      CAPTURE(binary_label(b));
      CHECK(image.kind == b.kind);
      CHECK(image.arch == b.arch);
      CHECK(unit.fatbins.offset + image.offset == b.offset);
      CHECK(image.size == b.size);
      CHECK(image.payload.size() == b.stored_size);
      // Kept apart: the driver, handed the cubins' fatbin, can never JIT PTX from it.
      CHECK(image.container == (b.kind == BinaryKind::ptx && !cubins.empty() ? 1u : 0u));
      (b.kind == BinaryKind::cubin ? cubins : b.kind == BinaryKind::ptx ? ptx : lto_ir).push_back(b.arch);
    }
    if (unit.linked) {  // its kernels call code given at run time: LTO-IR, linked with that code
      CHECK(cubins.empty());
      CHECK(ptx.empty());
      CHECK(lto_ir == archs);
      continue;
    }
    CHECK(lto_ir.empty());
    CHECK(cubins == archs);
    CHECK(ptx == (embed_ptx && !archs.empty() ? std::vector<unsigned>{archs.back()} : std::vector<unsigned>{}));
  }
}

// Every image is stored zstd-compressed, smaller than it loads; returns {stored, loaded} bytes in all.
inline std::pair<std::size_t, std::size_t> check_compressed(const Catalog& c) {
  std::size_t stored = 0, loaded = 0;
  for (const BinaryEntry& b : c.binaries) {
    CAPTURE(binary_label(b));
    CHECK(b.compression == (b.kind == BinaryKind::ltoir ? Compression::lto : Compression::zstd));
    CHECK(b.stored_size < b.size);
    stored += b.stored_size;
    loaded += b.size;
  }
  return {stored, loaded};
}

// Every cubin's ELF header names its architecture and every kernel of its unit is a symbol in it; every
// PTX image targets its architecture, defines the kernels and is NUL-terminated.
inline void check_images(const Catalog& c) {
  for (const UnitEntry& unit : c.units) {
    const auto unit_index = static_cast<std::uint32_t>(&unit - c.units.data());
    for (const BinaryEntry& b : c.binaries_of(unit)) {
      CAPTURE(c.str(unit.name));
      CAPTURE(binary_label(b));
      if (b.kind == BinaryKind::ltoir) {
        // fatbinary's own encoding, which only nvJitLink reads: alone in a fatbin of its own, which
        // test_linked_operator links with an operator.
        CHECK(b.compression == Compression::lto);
        const auto fatbin = detail::embedded_image_fatbin(c, b);
        REQUIRE_MESSAGE(fatbin.ok(), fatbin.error());
        CHECK(fatbin->size() > b.stored_size);  // the container's header, the image's, its payload
        continue;
      }
      const std::string bytes = c.image(b);
      REQUIRE(bytes.size() == b.size);
      if (b.kind == BinaryKind::cubin) {
        const auto cubin = detail::read_cubin(bytes);  // checks ELF64 and EM_CUDA
        REQUIRE_MESSAGE(cubin.ok(), cubin.error);
        CHECK(cubin.arch == b.arch);
        for (const KernelEntry& k : c.kernels)
          if (k.unit == unit_index) CHECK(cubin.defines(c.str(k.lowered)));
      } else {
        CHECK(bytes.back() == '\0');
        CHECK(bytes.find(".target sm_" + std::to_string(b.arch)) != std::string::npos);
        for (const KernelEntry& k : c.kernels)
          if (k.unit == unit_index) CHECK(bytes.find(".entry " + std::string(c.str(k.lowered))) != std::string::npos);
      }
    }
  }
}

// The bytes of section `name` of the ELF file at `path`, or empty.
inline std::string elf_section(const std::string& path, std::string_view name) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < sizeof(Elf64_Ehdr)) return {};
  Elf64_Ehdr eh;
  std::memcpy(&eh, file.data(), sizeof eh);
  if (eh.e_shoff + std::uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file.size() || eh.e_shstrndx >= eh.e_shnum) return {};
  const auto section = [&](std::size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, file.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  const Elf64_Shdr names = section(eh.e_shstrndx);
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = section(i);
    if (names.sh_offset + sh.sh_name >= file.size()) continue;
    if (std::string_view(file.data() + names.sh_offset + sh.sh_name) != name) continue;
    if (sh.sh_type == SHT_NOBITS || sh.sh_offset + sh.sh_size > file.size()) return {};
    return file.substr(sh.sh_offset, sh.sh_size);
  }
  return {};
}

// cuobjdump's view of the ELF file at `path`: its `.nv_fatbin` section reads as whole fatbins back to back
// (no padding the linker put between them), and holds the catalog's fatbins, every image of them.
inline void check_in_fatbin_section(const Catalog& c, const std::string& path) {
  CAPTURE(path);
  const std::string section = elf_section(path, ".nv_fatbin");
  REQUIRE_FALSE(section.empty());
  const auto images =
      detail::read_fatbins({reinterpret_cast<const unsigned char*>(section.data()), section.size()});
  REQUIRE_MESSAGE(images.ok(), images.error());
  CHECK(images->size() >= c.binaries.size());
  const std::string_view blobs(reinterpret_cast<const char*>(c.blobs), c.blobs_size);
  CHECK(section.find(blobs) != std::string::npos);
}

}  // namespace kiln::test
