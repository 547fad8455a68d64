// The one parser of sizes, counts and architectures (base/parse.hpp), which the kiln command and the
// environment variables share: what it takes, and that it refuses everything else by quoting it.
#include <doctest/doctest.h>

#include "base/parse.hpp"
#include "cache_test_util.hpp"  // set_setting

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

using kiln::detail::forced_arch;
using kiln::detail::forced_archs;
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

TEST_CASE("KILN_DEVICE_ARCH: DEVICE:ARCH pairs, the architecture as 80 or sm_80; anything else ignored") {
  using Forced = std::vector<std::pair<int, unsigned>>;
  kiln::test::set_setting("KILN_DEVICE_ARCH", "1:80,2:sm_86");
  CHECK(forced_archs() == Forced{{1, 80}, {2, 86}});
  CHECK(forced_arch(1) == 80);
  CHECK(forced_arch(2) == 86);
  CHECK(forced_arch(0) == 0);
  kiln::test::set_setting("KILN_DEVICE_ARCH", "0:120");
  CHECK(forced_arch(0) == 120);
  for (const char* bad : {"1", "1:", ":80", "1:8", "1:sm_8", "x:80", "1:80;2:86", "1:compute_80"}) {
    CAPTURE(std::string(bad));
    kiln::test::set_setting("KILN_DEVICE_ARCH", bad);
    CHECK(forced_archs().empty());
    CHECK(forced_arch(1) == 0);
  }
  kiln::test::set_setting("KILN_DEVICE_ARCH", nullptr);
  CHECK(forced_archs().empty());
}

TEST_CASE("KILN_DEVICE_ARCH naming a device twice is refused whole, saying which device") {
  for (const char* twice : {"0:80,0:90", "0:80,0:80", "1:80,2:86,1:sm_90"}) {
    CAPTURE(std::string(twice));
    kiln::test::set_setting("KILN_DEVICE_ARCH", twice);
    CHECK(forced_archs().empty());
    CHECK(forced_arch(0) == 0);
    CHECK(forced_arch(1) == 0);
    const auto parsed = kiln::detail::parse_forced_archs(twice);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error() == "device " + std::string(twice[0] == '0' ? "0" : "1") + " is named twice");
  }
  kiln::test::set_setting("KILN_DEVICE_ARCH", nullptr);
}
