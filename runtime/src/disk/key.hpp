// Internal helpers around cache keys: SHA-256, and rebuilding a key from stored text.
#pragma once

#include <kiln/cache.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::detail {

// SHA-256 of `bytes` (OpenSSL EVP), raw and as 64 lowercase hex characters.
std::array<unsigned char, 32> sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);

// The key whose text() is `text` (as stored in an entry file), so that `kiln cache verify` can check
// entries without knowing their fields; nullopt when the text has no valid "arch=sm_N" line.
std::optional<CacheKey> key_from_text(std::string_view text);

}  // namespace kiln::detail
