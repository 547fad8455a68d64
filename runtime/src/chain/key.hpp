// Internal helpers around cache keys: SHA-256, naming a key in messages, and rebuilding a key from stored text.
#pragma once

#include <kiln/cache.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::detail {

// SHA-256 of `bytes` (OpenSSL EVP), raw and as 64 lowercase hex characters.
std::array<unsigned char, 32> sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);
std::string to_hex(const unsigned char* bytes, std::size_t size);

// SHA-256 of bytes given in pieces, for what is too large to hold at once (a cache pack, a directory's
// files). OpenSSL's SHA256_Init/Update/Final, not EVP: EVP's first call in a process loads providers and
// reads openssl.cnf (~0.75 ms; remote/hmac.hpp).
using Sha256Digest = std::array<unsigned char, 32>;
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  Sha256Digest final();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// A field of a key's text ("registry", "unit", ...), unescaped as far as messages need; "?" when absent.
std::string key_field(std::string_view text, std::string_view name);
// "examples/block_sum_f32 sm_90 (key f433f5d0f4ee29d0)": what a message is about, from the key text.
std::string describe_key(const CacheKey& key);

// The key whose text() is `text` (as stored in an entry file), so that `kiln cache verify` can check
// entries without knowing their fields; nullopt when the text has no valid "arch=sm_N" line.
std::optional<CacheKey> key_from_text(std::string_view text);

}  // namespace kiln::detail
