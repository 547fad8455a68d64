// What the registry and programs tell the demand record (kiln/record.hpp) as they load.
#pragma once

#include <kiln/program.hpp>

#include <string_view>

namespace kiln::detail {

// The registry name of every program given at run time (their cache entries are under it); no table may
// take it (kiln-gen refuses it).
inline constexpr std::string_view kProgramRegistry = "program";

// A table's kernel that a tier after the embedded one served for `arch`.
void record_kernel(std::string_view registry, std::string_view kernel, unsigned arch);
// A program given at run time that a tier after memory served.
void record_program(const ProgramSource& source);

}  // namespace kiln::detail
