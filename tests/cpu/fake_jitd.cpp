// tests/cpu/fake_jitd.cpp — a kiln-jitd whose compiler is fake_compile: the pool tests need no NVRTC.
#include "fake_compile.hpp"
#include "jit_worker.hpp"

#include <unistd.h>

int main() { return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO, &kiln::test::fake_compile); }
