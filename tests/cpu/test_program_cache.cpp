// kiln::program()'s programs kept by content, at most KILN_PROGRAM_CACHE of them, the least recently used
// that nobody holds forgotten first; without a GPU.
#include <kiln/precompile.hpp>
#include <kiln/program.hpp>

#include "cache_test_util.hpp"  // ScopedEnv
#include "private_cache.hpp"
#include "program/program_cache.hpp"  // programs_kept

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

namespace {

// A program of its own content for each `n`.
kiln::ProgramSource numbered(int n) {
  kiln::ProgramSource s;
  s.source = "extern \"C\" __global__ void fill(float* y, float v) { y[threadIdx.x] = v + " + std::to_string(n) + "; }\n";
  s.name_expressions = {"fill"};
  s.label = "tests/numbered-" + std::to_string(n);
  return s;
}

using kiln::detail::programs_kept;
using kiln::test::PrivateCache;
using kiln::test::ScopedEnv;

}  // namespace

TEST_CASE("kiln::program keeps at most KILN_PROGRAM_CACHE programs, and the same object while it keeps one") {
  const PrivateCache here;
  const ScopedEnv cap("KILN_PROGRAM_CACHE", "3");
  const std::shared_ptr<kiln::Program> first = kiln::program(numbered(0), 0, here.options);
  CHECK(programs_kept() <= 3);
  CHECK(kiln::program(numbered(0), 0, here.options) == first);
  for (int n = 1; n < 8; ++n) {
    (void)kiln::program(numbered(n), 0, here.options);
    CHECK(programs_kept() <= 3);
  }
  // The most recently used are still found: the same objects.
  const std::shared_ptr<kiln::Program> last = kiln::program(numbered(7), 0, here.options);
  CHECK(kiln::program(numbered(7), 0, here.options) == last);
  CHECK(programs_kept() == 3);
}

TEST_CASE("a program nobody holds is forgotten before one that is held, and made again when asked for") {
  const PrivateCache here;
  const ScopedEnv cap("KILN_PROGRAM_CACHE", "2");
  const std::shared_ptr<kiln::Program> held = kiln::program(numbered(10), 0, here.options);
  std::weak_ptr<kiln::Program> dropped = kiln::program(numbered(11), 0, here.options);
  REQUIRE_FALSE(dropped.expired());  // the cache holds it
  REQUIRE(held->precompile(80).ok);
  REQUIRE(dropped.lock()->precompile(80).ok);
  // A third: the least recently used is the held one, but the one nobody holds goes first.
  (void)kiln::program(numbered(12), 0, here.options);
  CHECK(dropped.expired());
  CHECK(kiln::program(numbered(10), 0, here.options) == held);
  // The forgotten one is made again, and works: its binary from the disk cache.
  const std::shared_ptr<kiln::Program> again = kiln::program(numbered(11), 0, here.options);
  const kiln::PrecompileResult r = again->precompile(80);
  CHECK(r.ok);
  CHECK(r.cached);
  CHECK_FALSE(r.compiled);
}

TEST_CASE("a held program forgotten by the cache stays valid for its holder, and is no longer found by content") {
  const PrivateCache here;
  const ScopedEnv cap("KILN_PROGRAM_CACHE", "2");
  std::vector<std::shared_ptr<kiln::Program>> held;
  for (int n = 20; n < 23; ++n) held.push_back(kiln::program(numbered(n), 0, here.options));
  CHECK(programs_kept() == 2);
  // The oldest, held by the test alone now: still a program, which compiles.
  CHECK(held[0].use_count() == 1);
  CHECK(held[0]->label() == "tests/numbered-20");
  CHECK(held[0]->precompile(80).ok);
  CHECK(kiln::program(numbered(20), 0, here.options) != held[0]);
  CHECK(kiln::program(numbered(22), 0, here.options) == held[2]);
}

TEST_CASE("KILN_PROGRAM_CACHE 0 keeps every program") {
  const PrivateCache here;
  const ScopedEnv cap("KILN_PROGRAM_CACHE", "0");
  const std::size_t before = programs_kept();
  for (int n = 30; n < 34; ++n) (void)kiln::program(numbered(n), 0, here.options);
  CHECK(programs_kept() == before + 4);
}
