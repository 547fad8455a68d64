// HMAC-SHA-256 (RFC 2104) over OpenSSL's SHA-256 (chain/key.hpp): the tag that authenticates a remote entry.
#pragma once

#include "chain/key.hpp"  // Sha256, Sha256Digest, to_hex

#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::detail {

// HMAC-SHA-256 under `key` of the concatenation of `parts`.
//
// Built on OpenSSL's one-shot SHA-256 functions, not EVP (HMAC(), EVP_MAC): EVP's first call in a process
// loads providers and reads openssl.cnf, ~0.75 ms here, a third of the remote tier's 2 ms budget for a hit;
// this costs ~10 us (docs/facts.md, "The remote tier"). tests/cpu/test_remote_seal.cpp checks it against
// RFC 4231's test vectors and against OpenSSL's own HMAC().
Sha256Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);

// Equal without an early exit (CRYPTO_memcmp): a tag check must not tell how many bytes matched.
bool same_digest(const unsigned char* a, const unsigned char* b, std::size_t size);


}  // namespace kiln::detail
