// A demand record is input from elsewhere: what is not a regular file, or is too large, is refused at once;
// an entry that cannot be compiled is a result of its own while the rest compile. And what precompile says
// of a unit another process removed from the cache meanwhile.
#include <kiln/cache.hpp>
#include <kiln/catalog.hpp>
#include <kiln/error.hpp>
#include <kiln/precompile.hpp>
#include <kiln/record.hpp>
#include <doctest/doctest.h>

#include "cache_test_util.hpp"
#include "chain/entry.hpp"   // entries_path
#include "cli_test_util.hpp"  // record_field, says
#include "disk/files.hpp"    // entry_file_name
#include "disk/inventory.hpp"
#include "examples_catalog.hpp"
#include "own_process.hpp"
#include "run_process.hpp"
#include "text_util.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using kiln::test::contains;

std::string refusal(const std::string& path) {
  try {
    (void)kiln::read_record(path);
  } catch (const kiln::Error& e) {
    CHECK(e.code() == kiln::Errc::invalid_argument);
    return e.what();
  }
  return "read";
}

}  // namespace

TEST_CASE("a demand record that is a FIFO, a device, a directory or too large is refused at once, naming it") {
  kiln::test::TempDir tmp;
  const auto fifo = tmp.path() / "pipe.record";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // In a child with an alarm: a read that blocks in open() (no writer ever comes) fails the test, not hangs it.
  const int status = kiln::test::run_in_child([&] {
    ::alarm(10);
    kiln::test::ChildChecks checks;
    for (const auto& [file, kind] : {std::pair{fifo.string(), "a FIFO"}, std::pair{std::string("/dev/zero"), "a device"},
                                     std::pair{tmp.path().string(), "a directory"}}) {
      std::string why = "read";
      try {
        (void)kiln::read_record(file);
      } catch (const kiln::Error& e) {
        why = e.what();
      }
      checks.expect(contains(why, file + " is " + kind + ", not a regular file"), "says what it is: " + why);
    }
    return checks.exit_code();
  });
  CHECK(status == 0);
  // Larger than a record may be: refused from its size, before it is read (it would need 300 MiB of memory).
  const auto large = tmp.path() / "large.record";
  kiln::test::sparse_file(large, "kiln record 1\n", std::uint64_t{300} << 20);
  const std::string why = refusal(large.string());
  CHECK_MESSAGE(contains(why, large.string() + ": larger than 256 MiB"), why);
}

TEST_CASE("a record's kernel its registry no longer has is one failed result; the rest compile") {
  if (!kiln::test::in_own_process("a record's kernel its registry*")) return;
  kiln::DemandRecord record;
  record.kernels = {{"examples", "renamed_kernel", 86}, {"examples", "vector_add", 86}, {"elsewhere", "k", 86}};
  const auto results = kiln::precompile_record(record, 86, {&kiln::examples::catalog()});
  REQUIRE(results.size() == 3);
  std::size_t ok = 0;
  for (const auto& r : results) {
    CAPTURE(r.unit);
    CAPTURE(r.error.message);
    ok += r.ok;
    if (r.unit == "examples.renamed_kernel") {
      CHECK_FALSE(r.ok);
      CHECK(contains(r.error.message, "no kernel 'renamed_kernel'"));
    }
  }
  CHECK(ok == 1);
  CHECK(results.back().unit == "vector_add");
  CHECK(results.back().ok);
}

TEST_CASE("a unit another process removed from the cache meanwhile is named so, not evicted for the cap") {
  if (!kiln::test::in_own_process("a unit another process removed*")) return;
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const auto first = kiln::precompile(catalog, 86, {"vector_add"});
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].ok);
  kiln::DiskCache& cache = kiln::default_cache();
  // What `kiln cache clear` in another process does while this one precompiles: the entry goes.
  const auto clear = [&](const kiln::PrecompileResult&, std::size_t, std::size_t) {
    for (const auto& e : kiln::detail::take_inventory(cache).entries)
      std::filesystem::remove(kiln::detail::entries_path(cache.config().dir) / kiln::detail::entry_file_name(e.key.hex));
  };
  const auto second = kiln::precompile(catalog, 86, {"vector_add"}, 0, clear);
  REQUIRE(second.size() == 1);
  const kiln::PrecompileResult& r = second[0];
  CAPTURE(r.error.message);
  CHECK(r.cached);
  CHECK_FALSE(r.compiled);
  CHECK_FALSE(r.ok);
  CHECK(r.evicted);
  CHECK(contains(r.error.message, "removed meanwhile, not for its cap"));
  CHECK_FALSE(contains(r.error.message, "raise it"));
}
