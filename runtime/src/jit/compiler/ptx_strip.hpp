// Drops module-scope .global variables nothing references from PTX, so JIT cubins of CCCL code stay lean.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::detail {

struct StrippedPtx {
  std::string ptx;
  std::size_t removed = 0;  // .global definitions dropped
};

// Removes every module-scope `.global` variable definition whose name no other part of the text
// mentions (as a whole identifier token), repeating until none is left: a removed variable's
// initialiser may have been the only mention of another. NVRTC keeps the `static constexpr` members of
// libcu++/CUB (numeric_limits, is_same_v, ...) as such variables, ~1,000 per CUB unit, and each costs
// relocations and load time (docs/DESIGN.md). Declarations (`.extern`), function bodies and everything else
// are kept byte for byte. Text that does not parse as PTX module scope is returned unchanged.
StrippedPtx strip_unreferenced_globals(std::string_view ptx);

}  // namespace kiln::detail
