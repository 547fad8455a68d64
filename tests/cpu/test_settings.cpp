// The settings table (base/settings.hpp): read once per process, the only way kiln reads its environment
// variables, and the source of docs/configuration.md's table.
#include <doctest/doctest.h>

#include "base/settings.hpp"
#include "base/settings_page.hpp"
#include "cache_test_util.hpp"  // read_bytes, set_setting

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

// KILN_TEST_SOURCE_ROOT: the source tree, whose page and sources these cases read.
namespace {

using kiln::detail::kSettings;
using kiln::detail::setting;

const std::filesystem::path kSourceRoot = KILN_TEST_SOURCE_ROOT;

bool is_variable_name(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

TEST_CASE("settings: each row names one variable and says its type, default, readers and meaning") {
  std::set<std::string_view> names;
  for (const auto& row : kSettings) {
    CAPTURE(std::string(row.name));
    CHECK(is_variable_name(row.name));
    CHECK(names.insert(row.name).second);
    CHECK_FALSE(row.default_value.empty());
    CHECK_FALSE(row.readers.empty());
    CHECK_FALSE(row.doc.empty());
    CHECK(row.doc.find('\n') == std::string_view::npos);  // one line of the page's table
  }
  static_assert(kiln::detail::SettingName("KILN_CACHE_DIR").index() < kiln::detail::kSettingCount);
  CHECK(kiln::detail::SettingName("KILN_JIT_TRACE").row().name == "KILN_JIT_TRACE");
}

TEST_CASE("settings: read once per process, at the first read; a later setenv counts only once they are read again") {
  kiln::test::ScopedEnv before("KILN_REMOTE_KEY", "read-at-first");
  CHECK(setting("KILN_REMOTE_KEY") == "read-at-first");
  ::setenv("KILN_REMOTE_KEY", "set-later", 1);
  CHECK(setting("KILN_REMOTE_KEY") == "read-at-first");
  kiln::detail::reread_settings();
  CHECK(setting("KILN_REMOTE_KEY") == "set-later");
  ::unsetenv("KILN_REMOTE_KEY");
  kiln::detail::reread_settings();
  CHECK(setting("KILN_REMOTE_KEY").empty());
  ::setenv("KILN_REMOTE_KEY", "", 1);  // empty is unset
  kiln::detail::reread_settings();
  CHECK(setting("KILN_REMOTE_KEY").empty());
}

TEST_CASE("settings: the library's configurations read the snapshot, not the environment") {
  kiln::test::TempDir tmp;
  kiln::test::ScopedEnv dir("KILN_CACHE_DIR", (tmp.path() / "first").string());
  ::setenv("KILN_CACHE_DIR", (tmp.path() / "second").c_str(), 1);
  CHECK(kiln::CacheConfig::from_environment().dir == tmp.path() / "first");
  kiln::detail::reread_settings();
  CHECK(kiln::CacheConfig::from_environment().dir == tmp.path() / "second");
}

TEST_CASE("settings: docs/configuration.md's table of environment variables is the settings table") {
  const std::filesystem::path page_path = kSourceRoot / "docs" / "configuration.md";
  const std::string page = kiln::test::read_bytes(page_path);
  REQUIRE_FALSE(page.empty());
  const auto generated = kiln::detail::with_settings_table(page);
  REQUIRE_MESSAGE(generated.ok(), generated.error());
  const std::string differ = page_path.string() + " and base/settings.hpp differ: edit the rows of the table, then "
                             "rewrite the page with `ninja -C build settings-page`";
  CHECK_MESSAGE(*generated == page, differ);
  for (const auto& row : kSettings) {
    CAPTURE(std::string(row.name));
    CHECK(page.find("| `" + std::string(row.name) + "` |") != std::string::npos);
  }
}

TEST_CASE("settings: the page's table is replaced between its two lines, and a page without them is refused") {
  using kiln::detail::kSettingsPageBegin;
  using kiln::detail::kSettingsPageEnd;
  const std::string page = "# Title\n\n" + std::string(kSettingsPageBegin) + "| stale | table |\n" +
                           std::string(kSettingsPageEnd) + "\nAfter.\n";
  const auto generated = kiln::detail::with_settings_table(page);
  REQUIRE(generated.ok());
  CHECK(*generated == "# Title\n\n" + std::string(kSettingsPageBegin) + kiln::detail::settings_markdown() +
                          std::string(kSettingsPageEnd) + "\nAfter.\n");
  CHECK(kiln::detail::with_settings_table(*generated).value() == *generated);
  const auto no_begin = kiln::detail::with_settings_table("# Title\n" + std::string(kSettingsPageEnd));
  REQUIRE_FALSE(no_begin.ok());
  CHECK(no_begin.error().find("before the table") != std::string::npos);
  const auto no_end = kiln::detail::with_settings_table("# Title\n" + std::string(kSettingsPageBegin));
  REQUIRE_FALSE(no_end.ok());
  CHECK(no_end.error().find("after the table") != std::string::npos);
  const auto reversed = kiln::detail::with_settings_table(std::string(kSettingsPageEnd) + std::string(kSettingsPageBegin));
  CHECK_FALSE(reversed.ok());
}

TEST_CASE("settings: libkiln, its programs and the Python module read the table's variables through it alone") {
  // Other programs' variables that kiln passes on or looks at (HOME, LD_LIBRARY_PATH) may be read directly;
  // a variable of kiln's own (KILN_*) or one of the table's, only by base/settings.cpp.
  std::vector<std::string> needles{"getenv(\"KILN_"};
  for (const auto& row : kSettings) needles.push_back("getenv(\"" + std::string(row.name) + "\"");
  const std::filesystem::path allowed = kSourceRoot / "runtime" / "src" / "base" / "settings.cpp";
  std::size_t files = 0;
  for (const auto* dir : {"runtime/src", "runtime/tools", "python/src"}) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(kSourceRoot / dir)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu" && ext != ".cuh"))
        continue;
      ++files;
      if (e.path() == allowed) continue;
      const std::string text = kiln::test::read_bytes(e.path());
      for (const auto& needle : needles) {
        CAPTURE(e.path().string());
        const std::string why = needle + "...) outside base/settings.cpp: read it with setting()";
        CHECK_MESSAGE(text.find(needle) == std::string::npos, why);
      }
    }
  }
  CHECK(files > 50);  // the walk found the sources
}
