// HMAC-SHA-256 (RFC 2104) over OpenSSL's SHA-256: the tag that authenticates a remote entry; SHA-256 in
// pieces, for what is too large to hold (a cache pack).
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::detail {

using Sha256Digest = std::array<unsigned char, 32>;

// SHA-256 of bytes given in pieces (OpenSSL's SHA256_Init/Update/Final).
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

// HMAC-SHA-256 under `key` of the concatenation of `parts`.
//
// Built on OpenSSL's one-shot SHA-256 functions, not EVP (HMAC(), EVP_MAC): EVP's first call in a process
// loads providers and reads openssl.cnf, ~0.75 ms here, a third of the remote tier's 2 ms budget for a hit;
// this costs ~10 us (docs/DESIGN.md, measured facts). tests/cpu/test_remote_seal.cpp checks it against
// RFC 4231's test vectors and against OpenSSL's own HMAC().
Sha256Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);

// Equal without an early exit (CRYPTO_memcmp): a tag check must not tell how many bytes matched.
bool same_digest(const unsigned char* a, const unsigned char* b, std::size_t size);

std::string to_hex(const unsigned char* bytes, std::size_t size);

}  // namespace kiln::detail
