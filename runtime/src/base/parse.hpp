// The one parser of the numbers and switches people give kiln: sizes, counts, architectures and on/off,
// from the command line and from environment variables alike. Each takes the whole text (no sign, no spaces, nothing after it),
// refuses what it does not understand, and says what it expected; callers add which option or variable.
#pragma once

#include "base/result.hpp"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::detail {

// Bytes: "1073741824", or a number with a binary suffix K, M, G or T (any case, optionally "iB"):
// "64k", "512M", "2G", "3GiB". Refuses "", "-5", " 5", "5X" and anything past 2^64 - 1.
Result<std::uint64_t> parse_size(std::string_view text);

// A whole decimal number from `min` to `max`: "4". Refuses "", "-1", "+4", "4x", " 4" and what is out of range.
Result<std::uint64_t> parse_count(std::string_view text, std::uint64_t min, std::uint64_t max);

// An SM architecture: "sm_90" -> 90. Two or three digits, no leading zero (sm_10 to sm_999); refuses "90",
// "sm_", "sm_90a" and numbers that would wrap ("sm_4294967382").
Result<unsigned> parse_arch(std::string_view text);

// The architecture KILN_DEVICE_ARCH forces on device `ordinal` ("1:80,2:sm_86": device 1 takes sm_80's
// binaries, device 2 sm_86's), 0 when none; a value that does not parse is warned about once and ignored.
unsigned forced_arch(int ordinal);

// Every device KILN_DEVICE_ARCH names, with the architecture it forces, in the order given; empty when it
// is unset or refused (warned about once).
std::vector<std::pair<int, unsigned>> forced_archs();

// KILN_DEVICE_ARCH's value read: a device named twice is refused with the rest ("0:80,0:90" says
// nothing it can keep), as is anything that is not a list of DEVICE:ARCH; the failure says which.
Result<std::vector<std::pair<int, unsigned>>> parse_forced_archs(std::string_view value);

// On or off: "on", "1", "true", "yes" / "off", "0", "false", "no", in any case. Refuses anything else
// ("", "2", "disable"), saying what it accepts.
Result<bool> parse_switch(std::string_view text);

}  // namespace kiln::detail
