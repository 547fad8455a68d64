// The commands that show what is embedded: `list` fits its lines. Runs the real `kiln` binary.
#include <kiln/cache.hpp>
#include <doctest/doctest.h>

#include "cli/output.hpp"
#include "cli_test_util.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("a table wider than its line shortens its widest cells around \"...\", keeping start and end") {
  CHECK(kiln::cli::abbreviate("abcdefghij", 7) == "abc...j");
  CHECK(kiln::cli::abbreviate("abc", 7) == "abc");
  const std::string wide = "kiln::prim::reduce<" + std::string(300, 'x') + ">";
  kiln::cli::Table table;
  table.row({"kernel", "expression", "lowered"});
  table.row({"reduce_f32", wide, "_Z" + std::string(200, 'y') + "v"});
  std::ostringstream out;
  std::streambuf* was = std::cout.rdbuf(out.rdbuf());
  const bool shortened = table.print("    ", 160);
  const bool narrow = kiln::cli::Table{}.print("  ", 160);
  std::cout.rdbuf(was);
  CHECK(shortened);
  CHECK_FALSE(narrow);
  const auto rows = lines(out.str());
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) CHECK(row.size() <= 160);
  CHECK(rows[1].starts_with("    reduce_f32  kiln::prim::reduce<xxx"));
  CHECK(rows[1].find("x>  _Zyy") != std::string::npos);  // each cell keeps its end
  CHECK(rows[1].ends_with("yv"));
  CHECK(rows[1].find("...") != std::string::npos);
}

#ifdef KILN_TEST_CLI

using kiln::test::kiln_cli;
using kiln::test::says;

TEST_CASE("kiln list keeps every line within 160 characters") {
  kiln::test::TempDir tmp;
  const auto r = kiln_cli({"list"}, tmp.path());
  REQUIRE(r.status == 0);
  std::size_t longest = 0;
  for (const auto& line : lines(r.output)) {
    CAPTURE(line);
    CHECK(line.size() <= 160);
    longest = std::max(longest, line.size());
  }
  MESSAGE("longest line of kiln list: " << longest);
}

#endif
