// runtime/tools/kiln_jitd.cpp — kiln-jitd, the JIT compile worker: NVRTC runs in parallel only across processes (DESIGN.md).
//
// Started by libkiln's JitPool with pipes on stdin and stdout; speaks the frames of jit_protocol.hpp
// and exits at the end of its input. Not meant to be run by hand.
#include "jit_worker.hpp"

#include <unistd.h>

int main() { return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO, &kiln::detail::compile_unit); }
