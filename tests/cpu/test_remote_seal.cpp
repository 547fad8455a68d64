// The remote tier's authentication: HMAC-SHA-256 (RFC 4231's vectors, and OpenSSL's own HMAC), and sealed
// values: every alteration, truncation, missing tag and other fleet key is refused.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "chain/entry.hpp"
#include "remote/hmac.hpp"
#include "remote/sealed_entry.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>

using kiln::detail::FleetKey;
using kiln::detail::hmac_sha256;
using kiln::detail::open_entry;
using kiln::detail::seal_entry;
using kiln::detail::to_hex;

namespace {

std::string hmac_hex(std::string_view key, std::string_view data) {
  const auto d = hmac_sha256(key, {data});
  return to_hex(d.data(), d.size());
}

std::string repeat(unsigned char byte, std::size_t n) { return std::string(n, static_cast<char>(byte)); }

}  // namespace

TEST_CASE("HMAC-SHA-256 gives RFC 4231's test vectors") {
  CHECK(hmac_hex(repeat(0x0b, 20), "Hi There") == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hmac_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hmac_hex(repeat(0xaa, 20), repeat(0xdd, 50)) == "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  CHECK(hmac_hex(key4, repeat(0xcd, 50)) == "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  CHECK(hmac_hex(repeat(0xaa, 131), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(hmac_hex(repeat(0xaa, 131),
                 "This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                 "to be hashed before being used by the HMAC algorithm.") ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST_CASE("HMAC-SHA-256 agrees with OpenSSL's HMAC() for keys and messages of every length around a block") {
  std::mt19937 random(19);
  for (std::size_t key_size : {0u, 1u, 16u, 32u, 63u, 64u, 65u, 128u, 200u}) {
    for (std::size_t data_size : {0u, 1u, 55u, 56u, 64u, 1000u}) {
      const std::string key = kiln::test::noise(key_size, random());
      const std::string data = kiln::test::noise(data_size, random());
      unsigned char expected[32];
      unsigned int size = 0;
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), expected, &size);
      CAPTURE(key_size);
      CAPTURE(data_size);
      // The same message in two parts gives the same tag as in one.
      const auto split = hmac_sha256(key, {std::string_view(data).substr(0, data_size / 3), std::string_view(data).substr(data_size / 3)});
      CHECK(to_hex(split.data(), split.size()) == to_hex(expected, size));
    }
  }
}

TEST_CASE("a sealed entry opens only under its fleet key, whole and unaltered") {
  const kiln::CacheKey key = kiln::test::sample_key(1);
  const std::string file = kiln::detail::encode_entry(key, kiln::test::sample_entry(1));
  const FleetKey fleet("a fleet key of thirty-two bytes!");
  const std::string value = seal_entry(fleet, file);
  REQUIRE(value.size() == file.size() + kiln::detail::kSealOverhead);
  const auto opened = open_entry(fleet, value);
  REQUIRE(opened);
  CHECK(*opened == file);

  SUBCASE("another fleet key: named by both ids") {
    const FleetKey other("another fleet key, also 32 bytes");
    const auto refused = open_entry(other, value);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().find("another fleet key (id " + fleet.id_hex()) != std::string::npos);
    CHECK(refused.error().find("this process's key is " + other.id_hex()) != std::string::npos);
  }
  SUBCASE("no tag: a bare entry file, an empty value, a short one") {
    for (const std::string& v : {file, std::string(), value.substr(0, 40)}) {
      const auto refused = open_entry(fleet, v);
      REQUIRE_FALSE(refused);
      CHECK(refused.error().find("no authentication tag") != std::string::npos);
    }
  }
  SUBCASE("every single-bit flip is refused") {
    for (std::size_t i = 0; i < value.size(); ++i) {
      for (int bit = 0; bit < 8; bit += 3) {
        std::string altered = value;
        altered[i] = static_cast<char>(altered[i] ^ (1 << bit));
        CAPTURE(i);
        CHECK_FALSE(open_entry(fleet, altered));
      }
    }
  }
  SUBCASE("every truncation, and bytes appended, are refused") {
    for (std::size_t n = 0; n < value.size(); ++n) CHECK_FALSE(open_entry(fleet, value.substr(0, n)));
    CHECK_FALSE(open_entry(fleet, value + "x"));
  }
  SUBCASE("the key id reveals nothing and names the key") {
    CHECK(fleet.id_hex().size() == 16);
    CHECK(FleetKey("a fleet key of thirty-two bytes!").id_hex() == fleet.id_hex());
    CHECK(value.find("a fleet key") == std::string::npos);
  }
}
