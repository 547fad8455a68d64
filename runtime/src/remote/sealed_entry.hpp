// A remote cache's value: a disk-cache entry file sealed with an HMAC-SHA-256 tag under the fleet key.
//
// Layout: magic "\x89KILN-R1" (8 bytes; the 1 is this layout's version), the fleet key's id (8 bytes),
// the tag (32 bytes), then the entry file exactly as the disk cache writes it (chain/entry.hpp): already
// zstd-compressed, so the value is no larger than needed. The tag covers a domain label and the entry
// file; the entry file holds its key text, which the reader compares with the key it asked for, so a
// value moved to another key is refused too.
#pragma once

#include "base/result.hpp"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::detail {

inline constexpr std::string_view kSealMagic{"\x89KILN-R1", 8};
inline constexpr std::size_t kKeyIdSize = 8;
inline constexpr std::size_t kTagSize = 32;
inline constexpr std::size_t kSealOverhead = kSealMagic.size() + kKeyIdSize + kTagSize;

// The fleet key as the seal uses it: the key, and its id (HMAC of a fixed label: names the key in
// messages and values without revealing anything of it).
class FleetKey {
 public:
  explicit FleetKey(std::string key);
  const std::string& key() const noexcept { return key_; }
  const std::array<unsigned char, kKeyIdSize>& id() const noexcept { return id_; }
  std::string id_hex() const;

 private:
  std::string key_;
  std::array<unsigned char, kKeyIdSize> id_{};
};

std::string seal_entry(const FleetKey& key, std::string_view entry_file);

// The entry file inside `value`, only when its tag verifies under `key`; else what is wrong: no tag, a
// tag of another fleet key (with both ids), or a tag that does not verify (altered).
Result<std::string_view> open_entry(const FleetKey& key, std::string_view value);

}  // namespace kiln::detail
