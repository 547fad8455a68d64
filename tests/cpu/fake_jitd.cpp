// A kiln-jitd whose compiler is fake_compile, in its two stages: the pool tests need no NVRTC.
#include "fake_compile.hpp"
#include "jit/worker/serve.hpp"

#include <unistd.h>

#include <cstring>

int main(int argc, char** argv) {
  const bool zygotes = !(argc > 1 && std::strcmp(argv[1], kiln::detail::kNoForkArgument) == 0);
  return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO,
                                              {&kiln::test::fake_ptx_stage, &kiln::test::fake_link_stage}, zygotes);
}
