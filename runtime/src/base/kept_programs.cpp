// KILN_PROGRAM_CACHE read (base/kept_programs.hpp).
#include "base/kept_programs.hpp"

#include "base/parse.hpp"
#include "base/settings.hpp"
#include "base/warn_once.hpp"

#include <string>

namespace kiln::detail {

std::size_t kept_programs() {
  const std::string text = setting("KILN_PROGRAM_CACHE");
  if (text.empty()) return kDefaultKeptPrograms;
  const Result<std::uint64_t> count = parse_count(text, 0, 1'000'000'000);
  if (count) return static_cast<std::size_t>(*count);
  static WarnOnce& warnings = *new WarnOnce;  // leaked: programs may be made during static destruction
  warnings.warn("KILN_PROGRAM_CACHE", "KILN_PROGRAM_CACHE: " + count.error() + "; keeping " +
                                          std::to_string(kDefaultKeptPrograms) + " programs");
  return kDefaultKeptPrograms;
}

}  // namespace kiln::detail
