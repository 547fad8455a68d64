// The commands that show what is embedded and cached: `list` fits its lines, `cache stats` and `info`
// break the cache down by registry and architecture, `cache list` names every entry, `cache show` a
// pack's. Runs the real `kiln` binary over caches the tests fill.
#include <kiln/cache.hpp>
#include <kiln/cache_pack.hpp>
#include <doctest/doctest.h>

#include "cli/output.hpp"
#include "cli_test_util.hpp"
#include "fake_cubin.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

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

namespace {

kiln::CacheKey key_of(const std::string& registry, const std::string& unit, unsigned arch) {
  kiln::CacheKeyFields f;
  f.registry = registry;
  f.unit = unit;
  f.source_digest = std::string(64, 'a');
  f.arch = arch;
  f.nvrtc = "13.0";
  f.nvjitlink = "13.0";
  f.cccl = "3.0.1";
  return kiln::CacheKey::from(f);
}

kiln::CacheEntry entry_for(unsigned arch, const std::string& compiler, std::size_t code_bytes) {
  kiln::CacheEntry e;
  e.arch = arch;
  e.kernels = {{"k", "_Z1kv"}};
  e.compiler = compiler;
  e.cubin = kiln::test::fake_cubin(arch, {"_Z1kv"}, kiln::test::noise(code_bytes, arch));
  return e;
}

// Three entries of registry "geo" (two for sm_80, one made by the PTX tier for sm_90), one of "stats",
// and a precompiled header with its sum.
void fill(const std::filesystem::path& root) {
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE(cache.store(key_of("geo", "area", 80), entry_for(80, "nvrtc 13.0 + nvjitlink 13.0", 2000)));
  REQUIRE(cache.store(key_of("geo", "perimeter", 80), entry_for(80, "nvrtc 13.0 + nvjitlink 13.0", 3000)));
  REQUIRE(cache.store(key_of("geo", "area", 90), entry_for(90, "embedded PTX + nvjitlink 13.0", 2000)));
  REQUIRE(cache.store(key_of("stats", "mean", 80), entry_for(80, "nvrtc 13.0 + nvjitlink 13.0", 1000)));
  const auto entries = kiln::test::entries_dir(root);
  kiln::test::write_bytes(entries / "fam.pch", std::string(10000, 'p'));
  kiln::test::write_bytes(entries / "fam.pch.sum", std::string(40, 's'));
  std::filesystem::permissions(entries / "fam.pch", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::permissions(entries / "fam.pch.sum", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

// Whether a line of `text` has every one of `words`, in order, separated by spaces only.
bool has_row(const std::string& text, const std::vector<std::string>& words) {
  for (const auto& line : lines(text)) {
    std::istringstream in(line);
    std::vector<std::string> got;
    for (std::string w; in >> w;) got.push_back(w);
    if (std::search(got.begin(), got.end(), words.begin(), words.end()) != got.end()) return true;
  }
  return false;
}

}  // namespace

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

TEST_CASE("kiln cache stats and info break the cache down by registry and architecture") {
  kiln::test::TempDir tmp;
  fill(tmp.path());
  const auto stats = kiln_cli({"cache", "stats"}, tmp.path());
  CAPTURE(stats.output);
  CHECK(stats.status == 0);
  CHECK(says(stats, "4 entries, 1 precompiled header"));
  CHECK(has_row(stats.output, {"geo", "sm_80", "2"}));
  CHECK(has_row(stats.output, {"geo", "sm_90", "1"}));
  CHECK(has_row(stats.output, {"stats", "sm_80", "1"}));
  CHECK(has_row(stats.output, {"(precompiled", "headers)", "-", "1"}));
  // The JSON's shape: tests/cli_json_test.py.
  CHECK(kiln_cli({"cache", "stats", "--json"}, tmp.path()).status == 0);
  // info, with or without a GPU, says the same; without one, each kernel's unit on disk for which arch.
  const auto info = kiln_cli({"info"}, tmp.path());
  CAPTURE(info.output);
  CHECK(info.status == 0);
  CHECK(has_row(info.output, {"geo", "sm_90", "1"}));
}

TEST_CASE("kiln info without a GPU says for which architectures each kernel's unit is on disk") {
  kiln::test::TempDir tmp;
  {
    // An entry under the examples' own key text for vector_add is what precompile would make; the table
    // only reads the key, so one with the unit's name serves.
    kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
    REQUIRE(cache.store(key_of("examples", "vector_add", 86), entry_for(86, "nvrtc 13.0 + nvjitlink 13.0", 100)));
    REQUIRE(cache.store(key_of("examples", "vector_add", 120), entry_for(120, "nvrtc 13.0 + nvjitlink 13.0", 100)));
  }
  const auto info = kiln_cli({"info"}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}});
  CAPTURE(info.output);
  CHECK(info.status == 0);
  // "  vector_add  <embedded, as this build has it>  sm_86 sm_120"
  const auto rows = lines(info.output);
  CHECK(std::any_of(rows.begin(), rows.end(), [](const std::string& line) {
    return line.starts_with("  vector_add ") && line.ends_with("  sm_86 sm_120");
  }));
  CHECK(std::any_of(rows.begin(), rows.end(), [](const std::string& line) {
    return line.starts_with("  scale_f32 ") && line.ends_with("  -");
  }));
}

TEST_CASE("kiln cache list names every entry: registry, unit, arch, size, last use, the tier that made it") {
  kiln::test::TempDir tmp;
  fill(tmp.path());
  const auto all = kiln_cli({"cache", "list"}, tmp.path());
  CAPTURE(all.output);
  CHECK(all.status == 0);
  CHECK(has_row(all.output, {"geo", "area", "sm_80"}));
  CHECK(has_row(all.output, {"geo", "perimeter", "sm_80"}));
  CHECK(says(all, " s ago  jit "));
  CHECK(says(all, " s ago  ptx "));
  CHECK(says(all, "4 entries\n"));
  const auto geo90 = kiln_cli({"cache", "list", "--registry", "geo", "--arch", "sm_90"}, tmp.path());
  CAPTURE(geo90.output);
  CHECK(geo90.status == 0);
  CHECK(has_row(geo90.output, {"geo", "area", "sm_90"}));
  CHECK_FALSE(says(geo90, "perimeter"));
  CHECK(says(geo90, "1 entry of registry geo for sm_90"));
  const auto json = kiln_cli({"cache", "list", "--registry", "stats", "--json"}, tmp.path());
  CAPTURE(json.output);
  CHECK(json.status == 0);
  CHECK(says(json, "\"unit\": \"mean\""));
  CHECK(says(json, "\"made_by\": \"jit\""));
  CHECK_FALSE(says(json, "\"unit\": \"area\""));
  // A damaged entry is listed as such (verify removes it); the listing still succeeds.
  const auto victim = kiln::test::entry_path(tmp.path(), key_of("stats", "mean", 80));
  std::string bytes = kiln::test::read_bytes(victim);
  bytes[bytes.size() - 5] ^= 1;
  kiln::test::write_bytes(victim, bytes);
  const auto damaged = kiln_cli({"cache", "list"}, tmp.path());
  CAPTURE(damaged.output);
  CHECK(damaged.status == 0);
  CHECK(says(damaged, "(damaged: "));
  // What it does not understand: refused, exit 2.
  CHECK(kiln_cli({"cache", "list", "--frobnicate"}, tmp.path()).status == 2);
  CHECK(kiln_cli({"cache", "list", "--arch", "sm_8"}, tmp.path()).status == 2);
  CHECK(kiln_cli({"cache", "list", "extra"}, tmp.path()).status == 2);
  CHECK(kiln_cli({"cache", "list"}, tmp.path(), {{"KILN_CACHE", "off"}}).status == 1);
}

TEST_CASE("kiln cache show checks a pack whole and lists its entries; a damaged one exits 1") {
  kiln::test::TempDir tmp;
  fill(tmp.path());
  const auto pack = tmp.path() / "geo.kpack";
  {
    kiln::DiskCache cache(kiln::test::config_at(tmp.path()));
    REQUIRE(kiln::export_pack(cache, pack, {"geo", 0}).entries == 3);
  }
  const auto show = kiln_cli({"cache", "show", pack.string()}, tmp.path() / "other");
  CAPTURE(show.output);
  CHECK(show.status == 0);
  CHECK(says(show, "3 entries"));
  CHECK(has_row(show.output, {"geo", "area", "sm_90"}));
  CHECK(has_row(show.output, {"geo", "perimeter", "sm_80"}));
  CHECK(says(show, "  ptx  "));
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "other"));  // read-only: no cache made
  const auto json = kiln_cli({"cache", "show", pack.string(), "--json"}, tmp.path());
  CHECK(json.status == 0);
  CHECK(says(json, "\"unit\": \"perimeter\""));
  // One bit flipped: refused whole, with the reason.
  std::string bytes = kiln::test::read_bytes(pack);
  bytes[bytes.size() / 2] ^= 1;
  kiln::test::write_bytes(pack, bytes);
  const auto bad = kiln_cli({"cache", "show", pack.string()}, tmp.path());
  CAPTURE(bad.output);
  CHECK(bad.status == 1);
  CHECK(says(bad, "is not a sound cache pack: it is damaged"));
  CHECK(kiln_cli({"cache", "show", (tmp.path() / "missing.kpack").string()}, tmp.path()).status == 1);
  CHECK(kiln_cli({"cache", "show"}, tmp.path()).status == 2);
}

#endif
