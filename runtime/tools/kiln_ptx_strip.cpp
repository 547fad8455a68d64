// kiln-ptx-strip IN OUT: the PTX at IN without its unreferenced module-scope globals, written to OUT.
//
// The build tool behind lean embedded cubins: kiln-gen assembles each unit's cubins from its PTX after
// this step, by the same rule the JIT applies to what NVRTC writes (jit/compiler/ptx_strip.hpp), so that
// an embedded cubin loads as fast as a JIT-built one (docs/DESIGN.md, "Lean cubins").
#include "jit/compiler/ptx_strip.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: kiln-ptx-strip IN.ptx OUT.ptx\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "kiln-ptx-strip: cannot read " << argv[1] << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::ostringstream text;
  text << in.rdbuf();
  const kiln::detail::StrippedPtx stripped = kiln::detail::strip_unreferenced_globals(text.str());
  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  out << stripped.ptx;
  if (!out.flush()) {
    std::cerr << "kiln-ptx-strip: cannot write " << argv[2] << ": " << std::strerror(errno) << "\n";
    std::remove(argv[2]);
    return 1;
  }
  return 0;
}
