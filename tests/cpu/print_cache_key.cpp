// Prints the disk-cache key text of the examples' vector_add for sm_80, as a registry computes it in a
// fresh process, then whether this process has NVRTC mapped: the test of the key's compiler versions runs
// it with another libnvrtc.so.13 on LD_LIBRARY_PATH and checks that a disk hit costs no dlopen.
#include <kiln/cache.hpp>  // CacheKey
#include <kiln/kiln.hpp>

#include "examples_catalog.hpp"

#include <fstream>
#include <iostream>
#include <string>

int main() {
  kiln::Registry registry(kiln::examples::catalog());
  std::cout << registry.cache_key("vector_add", 80).text;
  std::ifstream maps("/proc/self/maps");
  bool mapped = false;
  for (std::string line; std::getline(maps, line);) mapped = mapped || line.find("libnvrtc.so") != std::string::npos;
  std::cout << "nvrtc mapped: " << (mapped ? "yes" : "no") << "\n";
  return 0;
}
