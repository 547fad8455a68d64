// docs/configuration.md's table of environment variables, made from the settings table.
#include "base/settings_page.hpp"

namespace kiln::detail {

namespace {

// A cell of a Markdown table: a '|' would end it early.
std::string cell(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string_view type_name(SettingType type) {
  switch (type) {
    case SettingType::on_off: return "on/off";
    case SettingType::size: return "size";
    case SettingType::seconds: return "seconds";
    case SettingType::count: return "count";
    case SettingType::mode: return "mode";
    case SettingType::path: return "path";
    case SettingType::url: return "URL";
    case SettingType::text: return "text";
  }
  return "text";
}

std::string settings_markdown() {
  std::string table = "| variable | type | default | read by | meaning |\n|---|---|---|---|---|\n";
  for (const SettingRow& row : kSettings) {
    table += "| `" + std::string(row.name) + "` | " + std::string(type_name(row.type)) + " | " +
             cell(row.default_value) + " | " + cell(row.readers) + " | " + cell(row.doc) + " |\n";
  }
  return table;
}

Result<std::string> with_settings_table(std::string_view page) {
  const auto begin = page.find(kSettingsPageBegin);
  if (begin == std::string_view::npos)
    return fail("the page has no line '" + std::string(kSettingsPageBegin.substr(0, kSettingsPageBegin.size() - 1)) +
                "' before the table");
  const auto body = begin + kSettingsPageBegin.size();
  const auto end = page.find(kSettingsPageEnd, body);
  if (end == std::string_view::npos)
    return fail("the page has no line '" + std::string(kSettingsPageEnd.substr(0, kSettingsPageEnd.size() - 1)) +
                "' after the table");
  return std::string(page.substr(0, body)) + settings_markdown() + std::string(page.substr(end));
}

}  // namespace kiln::detail
