// HMAC-SHA-256 as RFC 2104 defines it, on OpenSSL's SHA-256 (see remote/hmac.hpp for why not EVP).
#include "remote/hmac.hpp"

#define OPENSSL_SUPPRESS_DEPRECATED  // SHA256_Init/Update/Final: deprecated in OpenSSL 3, still its API
#include <kiln/error.hpp>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <stdexcept>

namespace kiln::detail {

namespace {

constexpr std::size_t kBlock = 64;  // SHA-256's block size, which RFC 2104 pads the key to

}  // namespace

Sha256Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  // K0: the key, hashed first when longer than a block, then padded with zeros to a block.
  std::array<unsigned char, kBlock> k0{};
  if (key.size() > kBlock) {
    Sha256 h;
    h.update(key.data(), key.size());
    const Sha256Digest d = h.final();
    std::copy(d.begin(), d.end(), k0.begin());
  } else {
    std::copy(key.begin(), key.end(), k0.begin());
  }
  std::array<unsigned char, kBlock> pad{};
  Sha256 inner;
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = k0[i] ^ 0x36;
  inner.update(pad.data(), pad.size());
  for (const std::string_view part : parts) inner.update(part.data(), part.size());
  const Sha256Digest inner_digest = inner.final();
  Sha256 outer;
  for (std::size_t i = 0; i < kBlock; ++i) pad[i] = k0[i] ^ 0x5c;
  outer.update(pad.data(), pad.size());
  outer.update(inner_digest.data(), inner_digest.size());
  OPENSSL_cleanse(k0.data(), k0.size());
  OPENSSL_cleanse(pad.data(), pad.size());
  return outer.final();
}

bool same_digest(const unsigned char* a, const unsigned char* b, std::size_t size) {
  return CRYPTO_memcmp(a, b, size) == 0;
}


}  // namespace kiln::detail
