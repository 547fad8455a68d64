// What a source includes from its include directories, by size: for the estimate of a unit with no
// embedded binary to size (a program given at run time), whose headers NVRTC parses on every compile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

// The bytes of the files `source` includes, directly or through each other (#include "x" and <x>), found
// in `dirs` (-I directories, in order), leaving out names in `given` (headers given in memory, counted
// apart). Bounded: at most kMaxScannedFiles files, each read only when a regular file of at most
// kMaxScannedBytes (larger ones count by their size alone), opened without blocking. An estimate's input,
// never a key's: a file it cannot read counts nothing.
inline constexpr std::size_t kMaxScannedFiles = 512;
inline constexpr std::uint64_t kMaxScannedBytes = std::uint64_t{1} << 20;
std::uint64_t included_bytes(std::string_view source, const std::vector<std::string_view>& given,
                             const std::vector<std::string>& dirs);

// The -I directories among options given one per line ("-Idir", "-I dir" on two lines, "--include-path=dir").
std::vector<std::string> include_dirs_of(std::string_view options);

}  // namespace kiln::detail
