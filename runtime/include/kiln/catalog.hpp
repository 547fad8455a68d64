// The build-time table (units, kernels, embedded fatbins and an index of their images) that a generated
// catalog defines.
#pragma once

#include <kiln/config.hpp>  // C++20, checked first

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln {

// A reference into Catalog::strings: one packed character blob, so the table needs no relocations.
struct StrRef {
  std::uint32_t offset;
  std::uint32_t size;
};

// ltoir: a linked unit's kernels as LTO-IR (nvcc -dlto), which only nvJitLink takes: linked at run time
// with the code a LinkedSource gives (docs/DESIGN.md, "Operators at run time").
enum class BinaryKind : std::uint8_t { cubin = 0, ptx = 1, ltoir = 2 };

// How an image is stored in its fatbin. lto: an LTO-IR image in fatbinary's own encoding, which only
// nvJitLink reads (handed the image's fatbin, which holds it alone).
enum class Compression : std::uint8_t { none = 0, zstd = 1, lto = 2 };

// A byte range of Catalog::blobs.
struct BlobRef {
  std::uint32_t offset;
  std::uint32_t size;
};

// One image of a unit's fatbins: a cubin, PTX or LTO-IR. arch is the SM number: 90 for sm_90 (cubin),
// compute_90 (ptx) or lto_90 (ltoir). Its fatbin entry (header, then payload) starts at Catalog::blobs + offset;
// Catalog::image() reads it. size: its bytes as loaded (PTX NUL-terminated); stored_size: as stored.
struct BinaryEntry {
  std::uint32_t arch;
  BinaryKind kind;
  std::uint32_t offset;
  std::uint32_t size;
  std::uint32_t stored_size;
  Compression compression;
};

// A translation unit: one row of the spec table, compiled once per architecture.
// Its binaries are binaries[first_binary, first_binary + binary_count), cubins by ascending arch, then PTX,
// then a linked unit's LTO-IR by ascending arch.
struct UnitEntry {
  StrRef name;
  StrRef options;  // compile options, one per line, as given to both nvcc and NVRTC
  // The unit's standard fatbins, back to back: one with its cubins, then (when the build embeds PTX) one
  // with its PTX. binaries[first_binary, ...) indexes their images.
  BlobRef fatbins;
  std::uint32_t first_binary;
  std::uint32_t binary_count;
  // SHA-256 (hex) of the translation unit, the contents of every header it includes, its name
  // expressions and options, taken at build time: the disk cache keys compiled binaries on it.
  StrRef digest;
  StrRef source;  // the generated translation unit, the text nvcc compiled: what the JIT tier compiles
  // The headers the unit's translation unit includes, directly or through each other (not what nvcc's
  // implicit cuda_runtime.h pulls in): Catalog::unit_headers[first_header, first_header + header_count).
  std::uint32_t first_header;
  std::uint32_t header_count;
  StrRef source_name;  // "<registry>.<unit>.cu": the file name of `source`, as nvcc and NVRTC compile it
  // The unit's kernels call code given at run time (a `linked = true` row): its binaries are LTO-IR (or
  // none), and only Registry::get with a LinkedSource builds it; warm-up and precompile pass it by.
  bool linked = false;
  // The JIT may compile the unit's kernels in parts, each part's cubin loaded as a module of its own: it
  // has at least two kernels and its PTX writes no module-scope variable (which two modules would each
  // hold a copy of), as the generator found when it compiled the unit (codegen/ptx_globals.py).
  bool splittable = false;
};

// A header in the decompressed header bundle: the name NVRTC looks it up by ("cub/config.cuh"), unique
// within each unit that includes it, and its bytes [offset, offset + size).
struct HeaderEntry {
  StrRef name;
  std::uint32_t offset;
  std::uint32_t size;
};

// A kernel the registry hands out. Entries are sorted by name so lookup is a binary search.
struct KernelEntry {
  StrRef name;        // registry name, e.g. "block_sum_f32"
  StrRef expression;  // C++ name expression, e.g. "kiln_examples::block_sum<float, 256>"
  StrRef lowered;     // the mangled symbol, identical in every binary of the unit
  std::uint32_t unit;
};

struct Catalog {
  std::string_view name;  // the registry's name, from the spec table
  std::span<const UnitEntry> units;
  std::span<const KernelEntry> kernels;
  std::span<const BinaryEntry> binaries;
  const char* strings;
  // Every unit's fatbins, back to back: the catalog's part of the program's `.nv_fatbin` section, where
  // cuobjdump finds them. Nothing registers them with the CUDA runtime; kiln loads one image at a time.
  const unsigned char* blobs;
  std::size_t blobs_size;
  std::string_view cccl_version;  // of the toolkit the units were built with, e.g. "3.0.1"
  // Every header the units include, for the JIT tier: one zstd frame of the headers back to back.
  std::span<const HeaderEntry> headers;
  std::span<const std::uint32_t> unit_headers;
  const unsigned char* header_bundle;
  std::size_t header_bundle_size;      // compressed
  std::size_t header_bundle_raw_size;  // decompressed
  std::string_view header_bundle_digest;  // SHA-256 (hex) of the compressed bundle

  std::string_view str(StrRef r) const noexcept { return {strings + r.offset, r.size}; }
  std::span<const unsigned char> fatbins_of(const UnitEntry& u) const noexcept {
    return {blobs + u.fatbins.offset, u.fatbins.size};
  }
  // The image as the driver or nvJitLink takes it: read from its fatbin entry, checked against `b`, and
  // decompressed (a copy each call). Throws Error(Errc::catalog) when the embedded bytes are not what
  // the table says (a damaged or mismatched build).
  std::string image(const BinaryEntry& b) const;
  std::span<const BinaryEntry> binaries_of(const UnitEntry& u) const noexcept {
    return binaries.subspan(u.first_binary, u.binary_count);
  }
  // The kernel called `name`, or nullptr. Allocation-free binary search over the sorted table.
  const KernelEntry* find(std::string_view name) const noexcept;
};

// What a generated catalog exports beside its accessor, as `<namespace>::catalog_stamp`: a loader of its
// shared library (kiln.Registry.load) looks the stamp up as data and checks it before it calls anything,
// so that a symbol that is not a kiln catalog, or one built against other kiln headers, is refused
// rather than called. The accessor is called through the stamp only.
inline constexpr std::uint64_t kCatalogMagic = 0x6b696c6e'63617461;  // "kilncata"
// Raised whenever Catalog or one of its entries changes layout or meaning; the sizes catch a change
// that forgot to.
inline constexpr std::uint32_t kCatalogAbi = 1;

struct CatalogStamp {
  std::uint64_t magic;
  std::uint32_t abi;
  std::uint32_t catalog_size, unit_size, kernel_size, binary_size, header_size;  // sizeof each struct
  const Catalog& (*catalog)();
};

// The stamp of `accessor`'s catalog, as built against these headers.
constexpr CatalogStamp catalog_stamp_of(const Catalog& (*accessor)()) noexcept {
  return {kCatalogMagic,       kCatalogAbi,         sizeof(Catalog),     sizeof(UnitEntry),
          sizeof(KernelEntry), sizeof(BinaryEntry), sizeof(HeaderEntry), accessor};
}

// Whether `stamp` is one of a catalog this kiln reads: the magic, the ABI and every size as these
// headers have them.
constexpr bool stamp_matches(const CatalogStamp& stamp) noexcept {
  const CatalogStamp ours = catalog_stamp_of(nullptr);
  return stamp.magic == ours.magic && stamp.abi == ours.abi && stamp.catalog_size == ours.catalog_size &&
         stamp.unit_size == ours.unit_size && stamp.kernel_size == ours.kernel_size &&
         stamp.binary_size == ours.binary_size && stamp.header_size == ours.header_size;
}

}  // namespace kiln
