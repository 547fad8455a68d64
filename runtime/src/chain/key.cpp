// The cache key: readable key text and its SHA-256, the name of the entry file.
#include "chain/key.hpp"

// OpenSSL's one-shot SHA-256, not EVP: EVP's first call initialises providers (and reads openssl.cnf),
// ~1 ms, which is the whole budget of a disk-tier get in a new process; SHA256() costs ~10 us on its
// first call. It is deprecated in OpenSSL 3 in favour of EVP but still part of its API.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <kiln/error.hpp>
#include <openssl/crypto.h>  // OPENSSL_cleanse
#include <openssl/sha.h>

#include <charconv>
#include <stdexcept>

namespace kiln {

namespace {

// One field per line: escape what could forge a line break (control bytes) and the escape itself, so
// that distinct fields always give distinct texts.
void append_field(std::string& out, std::string_view name, std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += name;
  out += '=';
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  out += '\n';
}

}  // namespace

std::string CacheKeyFields::text() const {
  std::string out;
  out.reserve(160 + registry.size() + unit.size() + source_digest.size());
  append_field(out, "format", std::to_string(kCacheFormatVersion));
  append_field(out, "registry", registry);
  append_field(out, "unit", unit);
  append_field(out, "source", source_digest);
  append_field(out, "arch", "sm_" + std::to_string(arch));
  append_field(out, "nvrtc", nvrtc);
  append_field(out, "nvjitlink", nvjitlink);
  append_field(out, "cccl", cccl);
  if (!linked.empty()) append_field(out, "linked", linked);
  if (code_arch != 0 && code_arch != arch) append_field(out, "code", "compute_" + std::to_string(code_arch));
  return out;
}

CacheKey CacheKey::from(const CacheKeyFields& fields) {
  CacheKey key;
  key.text = fields.text();
  key.hex = detail::sha256_hex(key.text);
  key.arch = fields.arch;
  return key;
}

namespace detail {

std::array<unsigned char, 32> sha256(std::string_view bytes) {
  std::array<unsigned char, 32> digest{};
  SHA256_CTX context;
  if (SHA256_Init(&context) != 1 || SHA256_Update(&context, bytes.data(), bytes.size()) != 1 ||
      SHA256_Final(digest.data(), &context) != 1)
    throw Error(Errc::cache, "kiln: SHA-256 failed in OpenSSL (SHA256_Init/Update/Final); is libcrypto usable?");
  return digest;
}

std::string sha256_hex(std::string_view bytes) {
  const std::array<unsigned char, 32> digest = sha256(bytes);
  return to_hex(digest.data(), digest.size());
}

std::string to_hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    hex += kHex[bytes[i] >> 4];
    hex += kHex[bytes[i] & 0xf];
  }
  return hex;
}

namespace {

void check_sha(int ok) {
  if (ok != 1) throw Error(Errc::cache, "kiln: SHA-256 failed in OpenSSL (SHA256_Init/Update/Final); is libcrypto usable?");
}

}  // namespace

struct Sha256::Context {
  SHA256_CTX c;
};

Sha256::Sha256() : context_(std::make_unique<Context>()) { check_sha(SHA256_Init(&context_->c)); }
Sha256::~Sha256() { OPENSSL_cleanse(&context_->c, sizeof context_->c); }
void Sha256::update(const void* data, std::size_t size) { check_sha(SHA256_Update(&context_->c, data, size)); }
Sha256Digest Sha256::final() {
  Sha256Digest digest{};
  check_sha(SHA256_Final(digest.data(), &context_->c));
  return digest;
}

std::string key_field(std::string_view text, std::string_view name) {
  std::string prefix = "\n";  // appended, not "\n" + ...: g++ 12 then warns falsely (-Wrestrict)
  prefix += name;
  prefix += '=';
  const auto at = text.find(prefix);
  if (at == std::string_view::npos) return "?";
  const auto begin = at + prefix.size();
  return std::string(text.substr(begin, text.find('\n', begin) - begin));
}

std::string describe_key(const CacheKey& key) {
  return key_field(key.text, "registry") + "/" + key_field(key.text, "unit") + " sm_" + std::to_string(key.arch) +
         " (key " + key.hex.substr(0, 16) + ")";
}

std::optional<CacheKey> key_from_text(std::string_view text) {
  static constexpr std::string_view kArchLine = "\narch=sm_";
  const auto at = text.find(kArchLine);
  if (at == std::string_view::npos) return std::nullopt;
  const char* first = text.data() + at + kArchLine.size();
  const char* last = text.data() + text.size();
  unsigned arch = 0;
  const auto [end, ec] = std::from_chars(first, last, arch);
  if (ec != std::errc() || end == first || end == last || *end != '\n') return std::nullopt;
  CacheKey key;
  key.text = std::string(text);
  key.hex = sha256_hex(key.text);
  key.arch = arch;
  return key;
}

}  // namespace detail
}  // namespace kiln
