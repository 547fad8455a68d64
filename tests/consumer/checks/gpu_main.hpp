// What the consumer's GPU check programs share: their main (skipped, exit 77, where kiln::driver() finds
// no CUDA driver or GPU; 1 on an error or a failed CHECK) and the check of the tier a kernel came from.
#pragma once

#include <kiln/driver.hpp>  // kiln::driver()
#include <kiln/kiln.hpp>

#include "check.hpp"

#include <cstdio>
#include <exception>

namespace consumer {

// From the embedded tier, or else JIT-built (or read back from the disk cache a first run filled).
inline void check_source(const kiln::Kernel& k, bool embedded) {
  if (embedded) {
    CHECK(k.provenance.source == kiln::Tier::embedded);
  } else {
    CHECK((k.provenance.source == kiln::Tier::jit || k.provenance.source == kiln::Tier::disk));
  }
}

inline int gpu_main(const char* what, void (*run_checks)()) {
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("%s skipped: %s\n", what, e.what());
    return 77;
  }
  try {
    run_checks();
  } catch (const std::exception& e) {
    std::printf("%s: %s\n", what, e.what());
    return 1;
  }
  std::printf("%s: %d failed\n", what, failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace consumer
