// One length-prefixed field of a text that must carry any bytes (a program's digest text, the demand record).
#pragma once

#include <string>
#include <string_view>

namespace kiln::detail {

// Appends "KIND N\nVALUE\n" (N: the value's length in bytes): the one way a program's digest text and the
// demand record write a value, so that any bytes survive.
inline void append_field(std::string& out, std::string_view kind, std::string_view value) {
  out += kind;
  out += ' ';
  out += std::to_string(value.size());
  out += '\n';
  out += value;
  out += '\n';
}

}  // namespace kiln::detail
