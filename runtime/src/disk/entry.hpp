// Encoding and fully validating decoding of one disk-cache entry file.
//
// Layout (all integers little-endian), every byte of the file in exactly one checked region:
//   header   64 bytes: magic "\x89KILN\r\n\x1a", u32 format version (kCacheFormatVersion), u32 flags (0),
//            u64 key text size, u64 zstd frame size, SHA-256 of the zstd frame (32 bytes);
//            64 + both sizes == the file size
//   key text CacheKeyFields::text(), compared byte for byte with the expected key
//   frame    one zstd frame, content size and content checksum present, holding the payload:
//            u32 arch, u32 kernel count, per kernel (str name, str lowered), str options, str compiler,
//            str cubin — each str is a u32 length and the bytes; nothing may follow the cubin
// The frame digest catches damage that zstd's content checksum cannot: a flipped bit in an unused part
// of a compressed block (~1% of single-bit flips) still decodes to the right bytes. With it, any change
// to a file is detected, and zstd's decoder only ever sees frames kiln wrote.
// The magic starts with a non-ASCII byte and holds CR LF and ^Z, so text-mode mangling is caught early.
#pragma once

#include <kiln/cache.hpp>

#include "base/result.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::detail {

inline constexpr std::string_view kEntryMagic{"\x89KILN\r\n\x1a", 8};
inline constexpr std::size_t kEntryHeaderSize = 64;
inline constexpr std::size_t kFrameDigestOffset = 32;
// Refuse to allocate for anything larger: no real cubin comes near it, and a hostile header cannot ask for more.
inline constexpr std::uint64_t kMaxPayloadBytes = std::uint64_t{1} << 30;
// A file larger than this is not even read: its frame could not hold a payload kiln would accept.
inline constexpr std::uint64_t kMaxEntryFileBytes = kMaxPayloadBytes + (std::uint64_t{1} << 20);


// The three regions of an entry file, after the header checks (magic, version, flags, sizes, frame digest).
struct EntryRegions {
  std::string_view header;
  std::string_view key_text;
  std::string_view frame;
};

// The entry file for `entry` under `key`. Does not validate `entry`; see check_entry.
std::string encode_entry(const CacheKey& key, const CacheEntry& entry);
// The entry, only if every region checks out and its cubin is a cubin for key.arch that defines
// every kernel's lowered name. Never reads outside `file`, whatever its contents.
Result<CacheEntry> decode_entry(std::string_view file, const CacheKey& key);

// The pieces of encode/decode, for the golden-file test and the fuzzer.
Result<EntryRegions> split_entry(std::string_view file);
std::string encode_payload(const CacheEntry& entry);
Result<CacheEntry> parse_payload(std::string_view payload);
std::string compress_frame(std::string_view payload);
Result<std::string> decompress_frame(std::string_view frame);
// Whether `entry` may reach the driver as a binary for `arch`; if not, what is wrong with it.
Status check_entry(const CacheEntry& entry, unsigned arch);

}  // namespace kiln::detail
