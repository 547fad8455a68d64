// What kiln::program() keeps of this process's programs (program/program_cache.cpp).
#pragma once

#include <cstddef>

namespace kiln::detail {

// How many programs kiln::program() keeps to find again by content now: at most KILN_PROGRAM_CACHE.
std::size_t programs_kept();

}  // namespace kiln::detail
