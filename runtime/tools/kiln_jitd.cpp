// kiln-jitd, the JIT compile worker: NVRTC runs in parallel only across processes (docs/DESIGN.md).
//
// Started by libkiln's JitPool with a unix socket on stdin and a pipe on stdout (and --no-fork when the
// pool never forks workers), or forked by a worker that holds a PCH family's precompiled header
// (jit/worker/serve.hpp); speaks the frames of jit/protocol.hpp and exits at the end of its input. Not meant to
// be run by hand.
//
// KILN_JITD_TEST_LINK_THREAD=1 (for tests) starts a thread that never ends after each link, as the CUDA
// driver does where nvJitLink finds libcuda (its compute cache): a host without a GPU can then check that
// workers are still forked from zygotes.
#include "jit/worker/serve.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

int main(int argc, char** argv) {
  const bool zygotes = !(argc > 1 && std::strcmp(argv[1], kiln::detail::kNoForkArgument) == 0);
  kiln::detail::CompileStages stages = kiln::detail::nvrtc_stages();
  if (const char* t = std::getenv("KILN_JITD_TEST_LINK_THREAD"); t != nullptr && std::strcmp(t, "1") == 0) {
    stages.link = [](const kiln::detail::CompileRequest& request, kiln::detail::PtxStage stage) {
      kiln::detail::CompileOutcome out = kiln::detail::link_stage(request, std::move(stage));
      std::thread([] {
        for (;;) ::pause();
      }).detach();
      return out;
    };
  }
  return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO, stages, zygotes);
}
