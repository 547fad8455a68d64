// What a program given at run time may ask of kiln: its input is untrusted, so everything the compile
// may read is in the key and nothing it asks for writes a file (docs/DESIGN.md, "Programs given at run
// time", the contract).
#pragma once

#include "base/result.hpp"

#include <kiln/program.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::detail {

// Caps on what a program hands in, checked before anything is hashed or compiled. A CUB unit's source
// and headers are ~9 MB; the caps keep a worker's memory and time bounded, not real programs out.
inline constexpr std::size_t kMaxProgramBytes = std::size_t{64} << 20;    // source + in-memory headers
inline constexpr std::size_t kMaxProgramHeaders = 10'000;                 // in-memory headers
inline constexpr std::size_t kMaxNameExpressions = 1'024;
inline constexpr std::size_t kMaxNameExpressionBytes = std::size_t{16} << 10;

// The options a program may give, as "what is allowed" for the message: the spec table's allowlist
// (codegen/spec.py) plus -I and a few NVRTC-only ones. None names a file to write or read, apart from an
// -I directory (keyed by its files).
std::string_view allowed_program_options();

// Throws Error(invalid_argument), naming the label and what is wrong, unless every option is allowed
// and the source, headers and name expressions are within the caps.
void check_program(const ProgramSource& source, std::string_view label);

// The directory an include option names (the value of -I DIR, -IDIR, --include-path=DIR), the index of
// the option after it in `next`; empty when options[i] is not one.
std::string include_option(const std::vector<std::string>& options, std::size_t i, std::size_t& next);

// An #include, #include_next, #import or __has_include of a text, as the preprocessor reads it (comments,
// line splices and the %: digraph taken as it takes them).
struct IncludeRef {
  std::string name;      // as written between the quotes or brackets
  bool quoted = false;   // "name", not <name>
  std::size_t line = 0;  // 1-based, where the directive begins
  bool probe = false;    // __has_include: asks whether the file is there
};

// Whether a path has a ".." part: it may lead out of every directory kiln keys.
bool has_parent_part(std::string_view name);

// The includes of `text`; or why one cannot be put in a key, "line N: ...": an absolute path, or a
// computed one (a macro: what it names is known only to the preprocessor). A name with a ".." part is
// returned: whether it stays in the key depends on where the text lies.
// With `trigraphs` (C++11 and C++14: trigraphs_on), "??/" and "??=" are taken as '\\' and '#'.
// A function-like macro that hands its parameter to __has_include (`#define HAS(x) __has_include(x)`, as
// CCCL and Kokkos define one) is a probe of its own: its definition is not refused, and where `probes` is
// given its name is added there and each use of a name there (`HAS(<version>)`) is scanned as
// __has_include is, so that the files of one directory check each other's uses.
Result<std::vector<IncludeRef>> scan_includes(std::string_view text, bool trigraphs,
                                              std::vector<std::string>* probes = nullptr);
// Whether the program's options choose a standard with trigraphs (its last -std=).
bool trigraphs_on(const std::vector<std::string>& options);

// Refuses (Error(invalid_argument), naming the label, the file and the line) every include of the source
// and the in-memory headers that scan_includes refuses, every in-memory header name that is absolute or
// has a ".." part, and every quoted include that NVRTC would read from the working directory: it looks
// beside the including file first, and the source's and in-memory headers' directory is the process's
// working directory, which is not in the key.
void check_program_includes(const ProgramSource& source, std::string_view label);

}  // namespace kiln::detail
