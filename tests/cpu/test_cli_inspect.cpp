// The commands that show what is embedded and cached: `list` fits its lines, `cache stats` and `info`
// break the cache down by registry and architecture, `cache list` names every entry, `cache show` a
// pack's. Runs the real `kiln` binary over caches the tests fill.
#include <kiln/cache.hpp>
#include <kiln/cache_pack.hpp>
#include <doctest/doctest.h>

#include "chain/key.hpp"
#include "chain/key_parts.hpp"
#include "cli/devices.hpp"
#include "cli/output.hpp"
#include "cli_test_util.hpp"
#include "examples_catalog.hpp"
#include "fake_cubin.hpp"
#include "jit/request.hpp"
#include "ptx_only_catalog.hpp"
#include "registry/query.hpp"
#include "run_process.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <tuple>

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("key parts: recorded after the compiler's line, read back, and what changed named") {
  using kiln::detail::KeyPart;
  kiln::CacheEntry entry;
  entry.compiler = "nvrtc 13.0 + nvjitlink 13.0";
  CHECK_FALSE(kiln::detail::recorded_key_parts(entry));  // an older kiln's entry
  const std::vector<KeyPart> was = kiln::detail::key_parts("tu", "-O3", {"f<int>"}, {{"x.h", "x"}, {"y.h", "y"}});
  kiln::detail::record_key_parts(entry, was);
  CHECK(kiln::detail::compiler_line(entry) == "nvrtc 13.0 + nvjitlink 13.0");
  REQUIRE(kiln::detail::recorded_key_parts(entry));
  CHECK(*kiln::detail::recorded_key_parts(entry) == was);
  const std::vector<KeyPart> now = kiln::detail::key_parts("tu", "-O3", {"f<int>"}, {{"x.h", "x2"}, {"z.h", "z"}});
  CHECK(kiln::detail::changed_parts(was, now) ==
        std::vector<std::string>{"header x.h", "header z.h (newly included)", "header y.h (no longer included)"});
  CHECK(kiln::detail::changed_parts(was, kiln::detail::key_parts("tu2", "-O2", {"f<int>"}, {{"x.h", "x"}, {"y.h", "y"}})) ==
        std::vector<std::string>{"its translation unit", "its options"});
  CHECK(kiln::detail::changed_parts(was, was).empty());
  // Recorded again: replaced, not appended.
  kiln::detail::record_key_parts(entry, now);
  CHECK(*kiln::detail::recorded_key_parts(entry) == now);
}

TEST_CASE("precompile without --arch compiles for every device's architecture, each once, KILN_DEVICE_ARCH applied") {
  // It compiled for device 0's alone: a server of sm_90s beside sm_80s started cold on the sm_80s.
  const auto device = [](int ordinal, unsigned arch, unsigned gpu_arch) {
    kiln::DeviceInfo d;
    d.ordinal = ordinal;
    d.arch = arch;
    d.gpu_arch = gpu_arch;
    return d;
  };
  const std::vector<kiln::DeviceInfo> one{device(0, 90, 90)};
  CHECK(kiln::cli::archs_taken(one) == std::vector<unsigned>{90});
  CHECK(kiln::cli::archs_taken_line(one) == "compiling for every visible device's architecture: sm_90 (device 0)");
  // Device 2 is an sm_90 told it is an sm_80 (KILN_DEVICE_ARCH=2:80), device 3 an sm_80.
  const std::vector<kiln::DeviceInfo> mixed{device(0, 90, 90), device(1, 90, 90), device(2, 80, 90), device(3, 80, 80)};
  CHECK(kiln::cli::archs_taken(mixed) == std::vector<unsigned>{90, 80});
  CHECK(kiln::cli::archs_taken_line(mixed) ==
        "compiling for every visible device's architecture: sm_90 (devices 0, 1), sm_80 (devices 2, 3, KILN_DEVICE_ARCH)");
}

#ifdef KILN_TEST_CLI
TEST_CASE("kiln precompile without --arch and without a GPU says to pass one and exits 1, compiling nothing") {
  kiln::test::TempDir tmp;
  for (const std::optional<std::string> forced : {std::optional<std::string>(), std::optional<std::string>("1:80")}) {
    const auto r = kiln::test::kiln_cli({"precompile", "vector_add"}, tmp.path(),
                                        {{"CUDA_VISIBLE_DEVICES", ""}, {"KILN_DEVICE_ARCH", forced}});
    CAPTURE(r.output);
    CHECK(r.status == 1);
    CHECK(kiln::test::says(r, "kiln precompile: no GPU to compile for: pass --arch sm_XX"));
    CHECK_FALSE(kiln::test::says(r, "compiling for"));
  }
}
#endif

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

namespace {

// A text with the line of `field` replaced by `value` (added after the last line when it has none).
std::string with_field(std::string text, const std::string& field, const std::string& value) {
  const std::string prefix = "\n" + field + "=";
  const auto at = text.find(prefix);
  if (at == std::string::npos) return text + field + "=" + value + "\n";
  const auto end = text.find('\n', at + 1);
  return text.replace(at + prefix.size(), end - at - prefix.size(), value);
}

// An entry of examples/vector_add under `key`, recording `parts` when given.
void plant(const std::filesystem::path& root, const kiln::CacheKey& key, const std::optional<std::vector<kiln::detail::KeyPart>>& parts,
           const std::string& options) {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const std::string lowered(catalog.str(catalog.find("vector_add")->lowered));
  kiln::CacheEntry e;
  e.arch = key.arch;
  e.kernels = {{"vector_add", lowered}};
  e.options = options;
  e.compiler = "nvrtc 13.0 + nvjitlink 13.0";
  if (parts) kiln::detail::record_key_parts(e, *parts);
  e.cubin = kiln::test::fake_cubin(key.arch, {lowered}, kiln::test::noise(500, 1));
  kiln::DiskCache cache(kiln::test::config_at(root));
  REQUIRE(cache.store(key, e));
}

}  // namespace

TEST_CASE("kiln why names the nearest entry on disk and the field of the key that differs") {
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const std::uint32_t unit = catalog.find("vector_add")->unit;
  const std::string options(catalog.str(catalog.units[unit].options));
  const auto parts = kiln::detail::unit_key_parts(catalog, unit);
  kiln::test::TempDir tmp;
  // sm_72: no cubin of the examples runs there, nor their PTX (of a newer architecture): it is compiled.
  kiln::CacheKey want;
  {
    kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "keys"));
    want = kiln::detail::unit_cache_key(catalog, catalog.units[unit], 72, cache);
  }
  const auto asked = [&](const std::filesystem::path& root) {
    const auto r = kiln_cli({"why", "--arch", "sm_72", "vector_add"}, root);
    CHECK(r.status == 0);
    return r;
  };
  const auto variant = [&](const std::string& name, const std::string& field, const std::string& value) {
    const auto root = tmp.path() / name;
    plant(root, *kiln::detail::key_from_text(with_field(want.text, field, value)), parts, options);
    return asked(root);
  };
  SUBCASE("nothing on disk") {
    const auto r = asked(tmp.path() / "empty");
    CAPTURE(r.output);
    CHECK(says(r, "vector_add (unit examples/vector_add) for sm_72: it will be compiled (expected to take "));
    CHECK(says(r, " ms on one thread, a guess from its size); nothing cached has its key (" + want.hex.substr(0, 16) + ")"));
    CHECK(says(r, "no entry of examples/vector_add is on disk"));
  }
  SUBCASE("its own entry serves it") {
    plant(tmp.path() / "own", want, parts, options);
    const auto r = asked(tmp.path() / "own");
    CAPTURE(r.output);
    CHECK(says(r, "the disk cache serves it (entry " + want.hex.substr(0, 16) + ")"));
  }
  SUBCASE("the architecture") {
    kiln::DiskCache cache(kiln::test::config_at(tmp.path() / "arch"));
    plant(tmp.path() / "arch", kiln::detail::unit_cache_key(catalog, catalog.units[unit], 70, cache), parts, options);
    const auto r = asked(tmp.path() / "arch");
    CAPTURE(r.output);
    CHECK(says(r, "differs in:\n    the architecture (sm_70, not sm_72)\n"));
  }
  SUBCASE("a compiler version") {
    for (const auto& [field, shown] : {std::pair{"nvrtc", "the NVRTC version (12.0, not "},
                                       std::pair{"nvjitlink", "the nvJitLink version (12.0, not "},
                                       std::pair{"cccl", "the CCCL version its headers are from (12.0, not "}}) {
      const auto r = variant(field, field, "12.0");
      CAPTURE(r.output);
      CHECK(says(r, std::string("differs in:\n    ") + shown));
    }
  }
  SUBCASE("the code it was built from, an operator") {
    const auto code = variant("code", "code", "compute_70");
    CAPTURE(code.output);
    CHECK(says(code, "differs in:\n    the code it is built from (compute_70's embedded PTX then; its own architecture's now)"));
    const auto linked = variant("linked", "linked", std::string(64, 'b'));
    CAPTURE(linked.output);
    CHECK(says(linked, "differs in:\n    an operator linked into it"));
  }
  SUBCASE("the source digest: a header, the options, or an older kiln's entry") {
    const auto key = *kiln::detail::key_from_text(with_field(want.text, "source", std::string(64, 'c')));
    auto header = parts;  // built when the unit included one header more
    header.push_back({"header gone.cuh", "0000000000000000"});
    auto source = parts, opts = parts;
    source[0].digest = opts[1].digest = "0000000000000000";
    using Parts = std::optional<std::vector<kiln::detail::KeyPart>>;
    const std::tuple<const char*, Parts, std::string, std::string> cases[] = {
        {"header", header, options, "differs in:\n    the source digest: header gone.cuh (no longer included)\n"},
        {"source", source, options, "differs in:\n    the source digest: its translation unit\n"},
        {"options", opts, "-DOTHER", "differs in:\n    the source digest: its options (then: -DOTHER; now: "},
        {"older", std::nullopt, options, "(made by an older kiln, which kept no digests of the parts)"},
    };
    for (const auto& [name, recorded, entry_options, told] : cases) {
      plant(tmp.path() / name, key, recorded, entry_options);
      const auto r = asked(tmp.path() / name);
      CAPTURE(r.output);
      CHECK(says(r, told));
    }
  }
  SUBCASE("the format: entries of another cache format beside") {
    std::filesystem::create_directories(tmp.path() / "format" / "v1");
    kiln::test::write_bytes(tmp.path() / "format" / "v1" / (std::string(64, 'd') + ".kiln"), "old");
    const auto r = asked(tmp.path() / "format");
    CAPTURE(r.output);
    CHECK(says(r, "1 entry of cache format 1 in "));
  }
}

TEST_CASE("kiln why: an entry on disk under the unit's key serves it before its older embedded PTX is assembled") {
  // As after `kiln precompile --arch sm_120`: the unit compiled from source, under its own key (code=none),
  // while the catalog embeds only compute_80 PTX, whose assembled binary would have a key of its own.
  const kiln::Catalog& catalog = kiln::test::ptx_only_catalog();
  const kiln::KernelEntry& k1 = *catalog.find("k1");
  const std::string lowered(catalog.str(k1.lowered));
  kiln::test::TempDir tmp;
  const auto why = [&](const std::filesystem::path& root) {
    const auto r = kiln::test::run_process({KILN_TEST_PTX_ONLY_CLI, "why", "--arch", "sm_120", "k1"},
                                           {{"KILN_CACHE_DIR", root.string()}, {"KILN_CACHE", std::nullopt},
                                            {"KILN_CACHE_MAX_BYTES", std::nullopt}, {"KILN_REMOTE_CACHE", std::nullopt}},
                                           std::chrono::seconds(180));
    CHECK(r.status == 0);
    return r;
  };
  const auto plant_key = [&](const std::filesystem::path& root, unsigned code_arch) {
    kiln::DiskCache cache(kiln::test::config_at(root));
    const kiln::CacheKey key = kiln::detail::unit_cache_key(catalog, catalog.units[k1.unit], 120, cache, code_arch);
    kiln::CacheEntry e;
    e.arch = 120;
    e.kernels = {{"k1", lowered}};
    e.compiler = "nvrtc 13.0 + nvjitlink 13.0";
    e.cubin = kiln::test::fake_cubin(120, {lowered});
    REQUIRE(cache.store(key, e));
    return key;
  };
  SUBCASE("nothing on disk: the PTX tier assembles it") {
    const auto r = why(tmp.path() / "empty");
    CAPTURE(r.output);
    CHECK(says(r, "k1 (unit ptx_only/ptx_unit) for sm_120: its embedded compute_80 will be assembled; nothing cached has its key"));
  }
  SUBCASE("the unit compiled from source is on disk") {
    const kiln::CacheKey key = plant_key(tmp.path() / "source", 0);
    const auto r = why(tmp.path() / "source");
    CAPTURE(r.output);
    CHECK(says(r, "k1 (unit ptx_only/ptx_unit) for sm_120: the disk cache serves it (entry " + key.hex.substr(0, 16) + ")"));
    CHECK_FALSE(says(r, "will be assembled"));
  }
  SUBCASE("the binary an earlier process assembled from the PTX is on disk") {
    const kiln::CacheKey key = plant_key(tmp.path() / "assembled", 80);
    const auto r = why(tmp.path() / "assembled");
    CAPTURE(r.output);
    CHECK(says(r, "k1 (unit ptx_only/ptx_unit) for sm_120: the disk cache serves it (entry " + key.hex.substr(0, 16) + ")"));
  }
}

TEST_CASE("kiln why: an embedded cubin serves it; what it does not understand is refused") {
  kiln::test::TempDir tmp;
  const kiln::Catalog& catalog = kiln::examples::catalog();
  const auto& cubin = catalog.binaries_of(catalog.units[catalog.find("vector_add")->unit]).front();
  const auto served = kiln_cli({"why", "--arch", "sm_" + std::to_string(cubin.arch), "vector_add"}, tmp.path());
  CAPTURE(served.output);
  CHECK(served.status == 0);
  CHECK(says(served, "the embedded sm_" + std::to_string(cubin.arch) + " cubin serves it; nothing is compiled"));
  CHECK(kiln_cli({"why", "--arch", "sm_72", "no_such_kernel"}, tmp.path()).status == 2);
  CHECK(kiln_cli({"why", "--arch", "sm_72"}, tmp.path()).status == 2);
  CHECK(kiln_cli({"why", "--frobnicate", "vector_add"}, tmp.path()).status == 2);
  const auto no_gpu = kiln_cli({"why", "vector_add"}, tmp.path(), {{"CUDA_VISIBLE_DEVICES", ""}});
  CAPTURE(no_gpu.output);
  CHECK(no_gpu.status == 1);
  CHECK(says(no_gpu, "pass --arch sm_XX"));
}

#endif
