// The build-time table (units, kernels, embedded binaries) that a generated catalog defines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace kiln {

// A reference into Catalog::strings: one packed character blob, so the table needs no relocations.
struct StrRef {
  std::uint32_t offset;
  std::uint32_t size;
};

enum class BinaryKind : std::uint8_t { cubin = 0, ptx = 1 };

// One device binary of a unit. arch is the SM number: 90 for sm_90 (cubin) or compute_90 (ptx).
// The bytes live at Catalog::blobs + offset; a PTX blob is followed by at least one NUL byte.
struct BinaryEntry {
  std::uint32_t arch;
  BinaryKind kind;
  std::uint32_t offset;
  std::uint32_t size;
};

// A translation unit: one row of the spec table, compiled once per architecture.
// Its binaries are binaries[first_binary, first_binary + binary_count), cubins by ascending arch, then PTX.
struct UnitEntry {
  StrRef name;
  StrRef options;  // compile options, one per line, as given to both nvcc and NVRTC
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
  std::span<const unsigned char> bytes(const BinaryEntry& b) const noexcept { return {blobs + b.offset, b.size}; }
  std::span<const BinaryEntry> binaries_of(const UnitEntry& u) const noexcept {
    return binaries.subspan(u.first_binary, u.binary_count);
  }
  // The kernel called `name`, or nullptr. Allocation-free binary search over the sorted table.
  const KernelEntry* find(std::string_view name) const noexcept;
};

}  // namespace kiln
