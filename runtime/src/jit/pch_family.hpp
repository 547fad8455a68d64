// PCH families: which compiles can share one NVRTC precompiled header, as the pool and the worker both key them.
#pragma once

#include "jit/compiler/compile.hpp"

#include <string>
#include <string_view>

namespace kiln::detail {

// The preprocessor directives a source starts with (comments and blank lines dropped, one directive per
// line): what NVRTC precompiles. It stops at the first line of anything else.
std::string leading_directives(std::string_view source);

// The key under which compiles can share a precompiled header: NVRTC reuses one only for the same
// options (the unit's, its include directories, the architecture, the PCH directory) and the same
// leading #includes. Empty when the request asks for no PCH. Units that differ only after their
// includes (template arguments, name expressions) are one family.
std::string pch_family(const CompileRequest& request);

}  // namespace kiln::detail
