// tests/gpu/main.cpp — runs the gpu suite, or exits 77 (skipped) on a machine without a CUDA driver or GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kiln/driver.hpp>
#include <kiln/error.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("gpu suite skipped: %s\n", e.what());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
