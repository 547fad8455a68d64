// runtime/src/jit_worker.hpp — the request loop of a compile worker process: what kiln-jitd runs, with the compiler injectable.
#pragma once

#include "jit_compile.hpp"

#include <functional>

namespace kiln::detail {

using CompileFunction = std::function<CompileOutcome(const CompileRequest&)>;

// Says hello on `out`, then answers each request read from `in` with compile's outcome (or, when it
// throws, a failure message carrying the exception), until `in` ends. Returns the process exit code:
// 0 at a clean end of input, 2 on a protocol or pipe error (described on stderr).
// Takes over stdout: if `out` is 1, it is moved to another descriptor and 1 points at stderr, so a
// stray print in the compiler cannot corrupt the frame stream.
int serve_compile_requests(int in, int out, const CompileFunction& compile);

}  // namespace kiln::detail
