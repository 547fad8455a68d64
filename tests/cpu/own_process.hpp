// A test case run again in a new process of this suite, where what a process configures once (the default
// disk cache, the JIT pool) is its own, and where a case that ends its process fails the case that ran it.
#pragma once

#include "cache_test_util.hpp"   // TempDir
#include "cli_test_util.hpp"     // says
#include "run_process.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace kiln::test {

// Runs the test cases matching `pattern` in a child with a cache directory of its own and no remote cache;
// true in that child, where the case goes on. In this process, checks that the one case ran and passed.
inline bool in_own_process(const std::string& pattern) {
  if (std::getenv("KILN_TEST_OWN_PROCESS") != nullptr) return true;
  TempDir tmp;
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  const auto child = run_process({self, "-tc=" + pattern},
                                 {{"KILN_TEST_OWN_PROCESS", "1"},
                                  {"KILN_CACHE_DIR", (tmp.path() / "cache").string()},
                                  {"KILN_CACHE_MAX_BYTES", std::nullopt},
                                  {"KILN_REMOTE_CACHE", std::nullopt}},
                                 std::chrono::seconds(240));
  CAPTURE(pattern);
  CAPTURE(child.output);
  CHECK(child.status == 0);
  CHECK(says(child, " 1 passed | 0 failed"));  // the case ran, in the child
  return false;
}

}  // namespace kiln::test
