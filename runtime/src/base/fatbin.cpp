// Reads fatbins as CUDA 13.0's fatbinary writes them (layout: docs/DESIGN.md, "Embedded fatbins"), and
// unpacks one image with libzstd.
#include "base/fatbin.hpp"

#include "base/zstd_context.hpp"

#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>

namespace kiln::detail {

namespace {

// Container header: u32 magic, u16 version, u16 header size, u64 size of the images after it.
constexpr std::size_t kContainerHeaderSize = 16;
// Image header fields kiln reads (the header may be longer: 112 bytes for sm_100 and later).
constexpr std::size_t kImageHeaderMin = 64;
constexpr std::size_t kKindAt = 0, kHeaderSizeAt = 4, kPaddedSizeAt = 8, kStoredSizeAt = 16, kArchAt = 28,
                      kFlagsAt = 40, kRawSizeAt = 56;
constexpr std::uint16_t kKindPtx = 1, kKindElf = 2, kKindLtoir = 8;
// A zstd block has a 3-byte header and holds at most 128 KiB: what a frame of n bytes can honestly claim.
constexpr std::uint64_t kZstdMaxRatio = 128 * 1024 / 3;

template <typename T>
std::optional<T> at(std::span<const unsigned char> bytes, std::size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return std::nullopt;
  T value;  // fatbins are little-endian, like every host kiln runs on
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

std::string where(std::size_t offset) { return "the fatbin image at byte " + std::to_string(offset); }

std::string hex(std::uint64_t value) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// binary_label's words (kiln/select.hpp), kept here: the fatbin fuzzer links this file alone.
std::string label(BinaryKind kind, unsigned arch) {
  return (kind == BinaryKind::cubin ? "sm_" : kind == BinaryKind::ptx ? "compute_" : "lto_") + std::to_string(arch);
}

}  // namespace

Result<FatbinImage> read_fatbin_image(std::span<const unsigned char> bytes, std::size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < kImageHeaderMin) {
    return fail(where(offset) + ": its header is cut short");
  }
  const auto image = bytes.subspan(offset);
  const auto kind = *at<std::uint16_t>(image, kKindAt);
  const auto header_size = *at<std::uint32_t>(image, kHeaderSizeAt);
  const auto padded = *at<std::uint64_t>(image, kPaddedSizeAt);
  const auto stored = *at<std::uint32_t>(image, kStoredSizeAt);
  FatbinImage r;
  r.arch = *at<std::uint32_t>(image, kArchAt);
  r.flags = *at<std::uint64_t>(image, kFlagsAt);
  const auto raw = *at<std::uint64_t>(image, kRawSizeAt);
  if (kind != kKindElf && kind != kKindPtx && kind != kKindLtoir) {
    return fail(where(offset) + " is of kind " + std::to_string(kind) + "; kiln reads ELF (2), PTX (1) and LTO-IR (8)");
  }
  r.kind = kind == kKindElf ? BinaryKind::cubin : kind == kKindPtx ? BinaryKind::ptx : BinaryKind::ltoir;
  if (header_size < kImageHeaderMin || header_size > image.size() || padded > image.size() - header_size) {
    return fail(where(offset) + " overruns its fatbin (header " + std::to_string(header_size) + " bytes, payload " +
                std::to_string(padded) + ", " + std::to_string(image.size()) + " left)");
  }
  // A stored size of 0: the payload is the image as it is, padded to 8 bytes.
  std::uint64_t stored_size = padded;
  r.size = padded;
  const bool lto = stored != 0 && r.kind == BinaryKind::ltoir && (r.flags & kFatbinFlagLto);
  if (stored != 0) {
    if (!lto && !(r.flags & kFatbinFlagZstd)) {
      return fail(where(offset) + " is compressed in a form kiln does not read (flags " + hex(r.flags) + ")");
    }
    if (stored > padded) {
      return fail(where(offset) + " stores " + std::to_string(stored) + " bytes in a payload of " + std::to_string(padded));
    }
    r.compression = lto ? Compression::lto : Compression::zstd;
    stored_size = stored;
    r.size = raw;
  }
  r.offset = offset;
  r.header_size = header_size;
  r.padded_size = static_cast<std::size_t>(padded);
  r.payload = image.subspan(header_size, static_cast<std::size_t>(stored_size));
  return r;
}

Result<std::vector<FatbinImage>> read_fatbins(std::span<const unsigned char> bytes) {
  std::vector<FatbinImage> images;
  std::size_t pos = 0, containers = 0;
  while (pos < bytes.size()) {
    const auto magic = at<std::uint32_t>(bytes, pos);
    const auto version = at<std::uint16_t>(bytes, pos + 4);
    const auto header_size = at<std::uint16_t>(bytes, pos + 6);
    const auto size = at<std::uint64_t>(bytes, pos + 8);
    if (!size) return fail(std::to_string(bytes.size() - pos) + " stray bytes at byte " + std::to_string(pos));
    if (*magic != kFatbinMagic) return fail("no fatbin at byte " + std::to_string(pos));
    if (*version != 1 || *header_size < kContainerHeaderSize) {
      return fail("the fatbin at byte " + std::to_string(pos) + " is of version " + std::to_string(*version) +
                  "; kiln reads version 1");
    }
    if (*header_size > bytes.size() - pos || *size > bytes.size() - pos - *header_size) {
      return fail("the fatbin at byte " + std::to_string(pos) + " claims more bytes than follow");
    }
    const std::size_t end = pos + *header_size + static_cast<std::size_t>(*size);
    const std::size_t index = containers++;
    const auto container = bytes.first(end);  // an image may not run past its own container
    pos += *header_size;
    while (pos < end) {
      auto image = read_fatbin_image(container, pos);
      if (!image) return fail(image.error());
      pos += image->header_size + image->padded_size;
      image->container = index;
      images.push_back(std::move(image).value());
    }
  }
  return images;
}

Result<std::string> unpack(const FatbinImage& image) {
  if (image.compression == Compression::none) {
    return std::string(reinterpret_cast<const char*>(image.payload.data()), image.payload.size());
  }
  if (image.compression == Compression::lto) {
    return fail(where(image.offset) + " is LTO-IR in fatbinary's own encoding, which only nvJitLink reads");
  }
  const unsigned long long claimed = ZSTD_getFrameContentSize(image.payload.data(), image.payload.size());
  if (claimed == ZSTD_CONTENTSIZE_ERROR || claimed == ZSTD_CONTENTSIZE_UNKNOWN) {
    return fail(where(image.offset) + ": its payload is not a zstd frame that states its size");
  }
  if (claimed != image.size || claimed / kZstdMaxRatio > image.payload.size()) {
    return fail(where(image.offset) + ": its zstd frame holds " + std::to_string(claimed) + " bytes, its header says " +
                std::to_string(image.size));
  }
  std::string out(static_cast<std::size_t>(claimed), '\0');
  const std::size_t n =
      ZSTD_decompressDCtx(thread_zstd_dctx(), out.data(), out.size(), image.payload.data(), image.payload.size());
  if (ZSTD_isError(n) || n != out.size()) {
    return fail(where(image.offset) + ": " +
                (ZSTD_isError(n) ? std::string("zstd: ") + ZSTD_getErrorName(n) : "its zstd frame ends early"));
  }
  return out;
}

namespace {

std::string what_image(const Catalog& catalog, const BinaryEntry& binary) {
  return "the embedded " + label(binary.kind, binary.arch) + " image (registry '" + std::string(catalog.name) + "')";
}

// The image's entry where the table says, checked against the table.
Result<FatbinImage> checked_image(const Catalog& catalog, const BinaryEntry& binary) {
  const std::string what = what_image(catalog, binary);
  auto image = read_fatbin_image({catalog.blobs, catalog.blobs_size}, binary.offset);
  if (!image) return fail(what + " is damaged: " + image.error());
  if (image->kind != binary.kind || image->arch != binary.arch || image->size != binary.size ||
      image->payload.size() != binary.stored_size || image->compression != binary.compression) {
    return fail(what + " is damaged: its fatbin entry holds " + label(image->kind, image->arch) + " of " +
                std::to_string(image->size) + " bytes (" + std::to_string(image->payload.size()) +
                " stored), not what the catalog says: rebuild");
  }
  return image;
}

}  // namespace

Result<std::string> embedded_image(const Catalog& catalog, const BinaryEntry& binary) {
  auto image = checked_image(catalog, binary);
  if (!image) return fail(image.error());
  auto bytes = unpack(*image);
  if (!bytes) return fail(what_image(catalog, binary) + " is damaged: " + bytes.error());
  return bytes;
}

Result<std::string> embedded_image_fatbin(const Catalog& catalog, const BinaryEntry& binary) {
  auto image = checked_image(catalog, binary);
  if (!image) return fail(image.error());
  if (image->compression == Compression::zstd) {
    // What unpack() checks before it allocates: here the driver unpacks, and must get a frame of the size
    // the table says.
    const unsigned long long claimed = ZSTD_getFrameContentSize(image->payload.data(), image->payload.size());
    if (claimed != image->size) {
      return fail(what_image(catalog, binary) + " is damaged: its payload is not a zstd frame of the " +
                  std::to_string(image->size) + " bytes its header says");
    }
  }
  // A container header (magic, version 1, its own size, the bytes of images that follow), then the
  // entry as it lies in the catalog's blobs: header and payload with its padding.
  const std::size_t entry = image->header_size + image->padded_size;
  char header[kContainerHeaderSize];
  const std::uint32_t magic = kFatbinMagic;
  const std::uint16_t version = 1, header_size = kContainerHeaderSize;
  const std::uint64_t size = entry;
  std::memcpy(header, &magic, sizeof magic);
  std::memcpy(header + 4, &version, sizeof version);
  std::memcpy(header + 6, &header_size, sizeof header_size);
  std::memcpy(header + 8, &size, sizeof size);
  std::string out;
  out.reserve(kContainerHeaderSize + entry);
  out.append(header, kContainerHeaderSize);
  out.append(reinterpret_cast<const char*>(catalog.blobs) + binary.offset, entry);
  return out;
}

}  // namespace kiln::detail
