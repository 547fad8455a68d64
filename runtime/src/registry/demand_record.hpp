// What the registry and programs tell the demand record (kiln/record.hpp) as they load.
#pragma once

#include "chain/unit_source.hpp"

#include <span>
#include <string>
#include <string_view>

namespace kiln::detail {

// A record's first line; what follows is program/record.cpp's format.
inline constexpr std::string_view kRecordHeader = "kiln record 1\n";

// A table's kernel that a tier after the embedded one served for `arch`.
void record_kernel(std::string_view registry, std::string_view kernel, unsigned arch);
// A program given at run time that a tier after memory served: its label, its unit source, and the
// options it was given (the unit source's first ones; the toolkit's -I after them is kiln's).
void record_program(std::string_view label, const UnitSource& unit, std::span<const std::string> options);

}  // namespace kiln::detail
