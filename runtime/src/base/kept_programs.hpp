// How much of the programs given at run time a process keeps (KILN_PROGRAM_CACHE): the bound of
// kiln::program()'s programs and of the header bundles the JIT keeps unpacked.
#pragma once

#include <cstddef>

namespace kiln::detail {

inline constexpr std::size_t kDefaultKeptPrograms = 1024;

// KILN_PROGRAM_CACHE as this process reads it (0: no limit); a value that does not parse is warned about
// once and the default kept.
std::size_t kept_programs();

}  // namespace kiln::detail
