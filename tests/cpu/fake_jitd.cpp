// A kiln-jitd whose compiler is fake_compile: the pool tests need no NVRTC.
#include "fake_compile.hpp"
#include "jit/worker/serve.hpp"

#include <unistd.h>

int main(int, char** argv) {
  kiln::detail::die_with_host();
  kiln::detail::relaunch_without_aslr(argv);  // as kiln-jitd does: the pool then asks it for PCH files
  kiln::detail::limit_worker_memory();         // and under its memory limit
  return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO, &kiln::test::fake_compile);
}
