// Reading the standard CUDA fatbins a catalog embeds: containers and image headers, bounds-checked, and an
// image's bytes as the driver or nvJitLink takes them.
#pragma once

#include "base/result.hpp"

#include <kiln/catalog.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::detail {

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr std::uint64_t kFatbinFlagZstd = 0x8000;  // the payload is one zstd frame
// An LTO-IR image in fatbinary's own encoding (CUDA 13.0 sets it, with 0x8000, on a compressed LTO-IR
// image, whose payload is no zstd frame): only nvJitLink reads it.
inline constexpr std::uint64_t kFatbinFlagLto = 0x10000;

// One image of a fatbin, as its entry header describes it (docs/DESIGN.md, "Embedded fatbins").
struct FatbinImage {
  BinaryKind kind = BinaryKind::cubin;
  unsigned arch = 0;                          // 90: sm_90 for a cubin, compute_90 for PTX
  std::size_t container = 0;                  // which fatbin of the bytes read holds it, from 0
  std::uint64_t flags = 0;
  std::size_t offset = 0;                     // of the entry header, in the bytes read
  std::size_t header_size = 0;
  std::size_t padded_size = 0;                // the payload's room: the next image's header follows it
  std::span<const unsigned char> payload;     // as stored
  std::uint64_t size = 0;                     // as loaded: decompressed
  Compression compression = Compression::none;
};

// The image whose entry header starts at `offset` in `bytes`; neither may overrun `bytes`.
Result<FatbinImage> read_fatbin_image(std::span<const unsigned char> bytes, std::size_t offset);

// Every image of the fatbins in `bytes`, which must hold whole containers back to back and nothing else
// (as cuobjdump reads a `.nv_fatbin` section).
Result<std::vector<FatbinImage>> read_fatbins(std::span<const unsigned char> bytes);

// The image's bytes as the driver or nvJitLink takes them: its payload, decompressed when compressed.
// A frame that does not hold exactly the stated size is refused before anything is allocated for it.
Result<std::string> unpack(const FatbinImage& image);

// The catalog's image `binary`: its entry read where the table says, checked against the table (kind,
// arch, sizes, compression) and unpacked. A failure names the registry, the image and what is wrong.
Result<std::string> embedded_image(const Catalog& catalog, const BinaryEntry& binary);

// The catalog's image `binary` in a fatbin of its own (a container header, then its entry as stored:
// still compressed), checked the same way, and a zstd frame's stated size too: what nvJitLink takes
// (NVJITLINK_INPUT_FATBIN) for an LTO-IR image, which kiln cannot unpack (Compression::lto), and what
// the driver unpacks as it loads a cubin (cuLibraryLoadData). Only that image: never others for the
// driver or nvJitLink to choose among (kiln-gen packs each LTO-IR image alone already; a unit's cubins
// share one fatbin).
Result<std::string> embedded_image_fatbin(const Catalog& catalog, const BinaryEntry& binary);

}  // namespace kiln::detail
