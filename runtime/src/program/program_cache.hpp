// What kiln::program() keeps of this process's programs (program/program_cache.cpp).
#pragma once

#include <kiln/program.hpp>

#include <cstddef>

namespace kiln::detail {

// How many programs kiln::program() keeps to find again by content now: at most KILN_PROGRAM_CACHE.
std::size_t programs_kept();

// Whether `program` was made of `source`: its text, headers, options and name expressions, byte for byte
// (the label aside). Defined with the program (program/program.cpp), whose unit source holds them.
bool has_content(const Program& program, const ProgramSource& source);

}  // namespace kiln::detail
