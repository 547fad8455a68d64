// Runs the gpu suite, or exits 77 (skipped) on a machine without a CUDA driver or GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <kiln/driver.hpp>
#include <kiln/error.hpp>

#include <cstdio>
#include <cstring>

int disk_child_main(const char* dir);     // test_disk_tier.cpp
int program_child_main(const char* dir);  // test_program.cpp

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--disk-child") == 0) return disk_child_main(argv[2]);
  if (argc == 3 && std::strcmp(argv[1], "--program-child") == 0) return program_child_main(argv[2]);
  try {
    kiln::driver();
  } catch (const kiln::Error& e) {
    std::printf("gpu suite skipped: %s\n", e.what());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
