// Encoding and fully validating decoding of one disk-cache entry file.
//
// Layout (all integers little-endian), every byte of the file in exactly one checked region:
//   header   64 bytes: magic "\x89KILN\r\n\x1a", u32 format version (kCacheFormatVersion), u32 flags (0),
//            u64 key text size, u64 zstd frame size, SHA-256 of the zstd frame (32 bytes);
//            64 + both sizes == the file size
//   key text CacheKeyFields::text(), compared byte for byte with the expected key
//   frame    one zstd frame, content size and content checksum present, holding the payload:
//            u32 arch, u32 kernel count, per kernel (str name, str lowered), str options, str compiler
//            (what built it on its first line; the key's parts after it, chain/key_parts.hpp),
//            u32 image count, per image (u32 kernel count, u32 index of each of its kernels, str cubin)
//            — each str is a u32 length and the bytes; nothing may follow the last cubin. One image
//            holding every kernel is a unit compiled whole (CacheEntry::cubin), several its parts
// The frame digest catches damage that zstd's content checksum cannot: a flipped bit in an unused part
// of a compressed block (~1% of single-bit flips) still decodes to the right bytes. With it, any change
// to a file is detected, and zstd's decoder only ever sees frames kiln wrote.
// The magic starts with a non-ASCII byte and holds CR LF and ^Z, so text-mode mangling is caught early.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"

#include <cstddef>
#include <filesystem>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::detail {

inline constexpr std::string_view kEntryMagic{"\x89KILN\r\n\x1a", 8};
inline constexpr std::size_t kEntryHeaderSize = 64;
inline constexpr std::size_t kFrameDigestOffset = 32;
// The caps on what an entry may hold, so that a hostile or damaged file costs at most this much memory
// (docs/DESIGN.md, "Memory and disk: what untrusted bytes may cost"). The largest real entry is a
// primitive's: 435 KB of payload (docs/facts.md, "The disk tier"), so 64 MiB leaves a margin of over 100x.
inline constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{64} << 20;
// The key text is a few hundred bytes (CacheKeyFields::text); 64 KiB leaves room for long names.
inline constexpr std::uint64_t kMaxKeyTextBytes = std::uint64_t{64} << 10;
// What zstd may need for a payload at the cap (ZSTD_COMPRESSBOUND: the size plus 1/256).
inline constexpr std::uint64_t kMaxFrameBytes = kMaxPayloadBytes + (kMaxPayloadBytes >> 8);
inline constexpr std::uint64_t kMaxEntryFileBytes = kEntryHeaderSize + kMaxKeyTextBytes + kMaxFrameBytes;

// What an entry file's header promises after it, checked against the caps.
struct EntrySizes {
  std::uint64_t key_text = 0;
  std::uint64_t frame = 0;
  std::uint64_t file() const noexcept { return kEntryHeaderSize + key_text + frame; }
};
// The first kEntryHeaderSize bytes of a file (fewer: "truncated header"): magic, version, flags, and
// sizes within the caps. What a reader checks before reading, or allocating for, anything more.
Result<EntrySizes> read_entry_header(std::string_view header);
// Whether a file of `file_size` bytes holds exactly what its header promises.
Status check_entry_size(const EntrySizes& sizes, std::uint64_t file_size);


// The three regions of an entry file, after the header checks (magic, version, flags, sizes, frame digest).
struct EntryRegions {
  std::string_view header;
  std::string_view key_text;
  std::string_view frame;
};

// The entry file for `entry` under `key`. Does not validate `entry`; see check_entry.
std::string encode_entry(const CacheKey& key, const CacheEntry& entry);
// The entry, only if every region checks out and each of its cubins is a cubin for key.arch that defines
// the lowered name of each of its kernels. Never reads outside `file`, whatever its contents.
Result<CacheEntry> decode_entry(std::string_view file, const CacheKey& key);

// The pieces of encode/decode, for the golden-file test and the fuzzer.
Result<EntryRegions> split_entry(std::string_view file);
std::string encode_payload(const CacheEntry& entry);
Result<CacheEntry> parse_payload(std::string_view payload);
std::string compress_frame(std::string_view payload);
Result<std::string> decompress_frame(std::string_view frame);
// Whether `entry` may reach the driver as a binary for `arch`; if not, what is wrong with it.
Status check_entry(const CacheEntry& entry, unsigned arch);

// <root>/v<format version>: where the entries of this format (and the PCH files and locks beside them)
// live under a cache directory `root`.
std::filesystem::path entries_path(const std::filesystem::path& root);

}  // namespace kiln::detail
