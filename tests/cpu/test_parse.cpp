// The one parser of sizes, counts and architectures (base/parse.hpp), which the kiln command and the
// environment variables share: what it takes, and that it refuses everything else by quoting it.
#include <doctest/doctest.h>

#include "base/parse.hpp"

#include <cstdint>
#include <string>

using kiln::detail::parse_arch;
using kiln::detail::parse_count;
using kiln::detail::parse_size;

TEST_CASE("parse_size: bytes, or K/M/G/T (any case, optionally iB); nothing else") {
  const std::pair<const char*, std::uint64_t> good[] = {
      {"0", 0}, {"1", 1}, {"12345", 12345}, {"64k", 64ull << 10}, {"512M", 512ull << 20}, {"2G", 2ull << 30},
      {"3GiB", 3ull << 30}, {"1t", 1ull << 40}, {"18446744073709551615", UINT64_MAX}, {"16777215T", 16777215ull << 40}};
  for (const auto& [text, bytes] : good) {
    CAPTURE(std::string(text));
    const auto parsed = parse_size(text);
    REQUIRE_MESSAGE(parsed.ok(), parsed.error());
    CHECK(*parsed == bytes);
  }
  for (const char* bad : {"", "-5", "+5", " 5", "5 ", "5X", "5MB", "iB", "5iB", "M", "0x10", "1.5G", "18446744073709551616",
                          "16777216T", "99999999999T"}) {
    CAPTURE(std::string(bad));
    const auto parsed = parse_size(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().find(std::string("'") + bad + "' is not a size") == 0);
  }
}

TEST_CASE("parse_count: a whole decimal number within its bounds") {
  CHECK(*parse_count("1", 1, 256) == 1);
  CHECK(*parse_count("256", 1, 256) == 256);
  CHECK(*parse_count("0", 0, 10) == 0);
  for (const char* bad : {"", "0", "257", "-1", "+4", "4x", " 4", "4294967297", "99999999999999999999999"}) {
    CAPTURE(std::string(bad));
    const auto parsed = parse_count(bad, 1, 256);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error() == std::string("'") + bad + "' is not a whole number from 1 to 256");
  }
}

TEST_CASE("parse_arch: sm_ and two or three digits, never wrapped") {
  CHECK(*parse_arch("sm_80") == 80);
  CHECK(*parse_arch("sm_90") == 90);
  CHECK(*parse_arch("sm_120") == 120);
  for (const char* bad : {"", "90", "sm_", "sm_9", "sm_090", "sm_1000", "sm_86x", "sm_90a", "SM_90", "sm_-90",
                          "sm_4294967382", "compute_90"}) {
    CAPTURE(std::string(bad));
    const auto parsed = parse_arch(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().find(std::string("'") + bad + "' is not an architecture") == 0);
  }
}
