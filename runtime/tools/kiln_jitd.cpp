// kiln-jitd, the JIT compile worker: NVRTC runs in parallel only across processes (docs/facts.md,
// "Compilers: NVRTC, nvJitLink and CuPy").
//
// Started by libkiln's JitPool with a pipe on stdin and one on stdout; speaks the frames of
// jit/protocol.hpp and exits at the end of its input. Not meant to be run by hand.
//
// It runs with ASLR off: it sets personality ADDR_NO_RANDOMIZE and executes itself again, as `setarch
// -R` does, so that NVRTC's PCH heap lies at the same address in every worker and a precompiled header
// one worker wrote is one every later worker (of any process) can read (docs/DESIGN.md, "PCH across
// processes", says what that costs). KILN_JIT_PCH=0 keeps ASLR on (the pool sets it for a worker that
// compiles a program given at run time); where the kernel refuses (a seccomp profile), the worker runs
// with it on and says so in its hello: its units compile without PCH files.
#include "jit/compiler/nvrtc_library.hpp"
#include "jit/worker/serve.hpp"

#include <unistd.h>

int main(int, char** argv) {
  kiln::detail::die_with_host();
  kiln::detail::relaunch_without_aslr(argv);
  kiln::detail::limit_worker_memory();  // KILN_JIT_MEMORY: a program that would take the machine fails alone
  // The compilers before the hello, in every worker alike (so that each fresh worker's heap is laid out
  // as every other's, which a PCH file needs): a worker the pool starts ahead of its first request
  // (JitPool::start_ahead) has them ready when it comes. One that cannot be loaded fails that request.
  kiln::detail::preload_compilers();
  return kiln::detail::serve_compile_requests(STDIN_FILENO, STDOUT_FILENO, kiln::detail::compile_unit);
}
