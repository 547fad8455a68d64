// docs/configuration.md's table of environment variables, made from the settings table (base/settings.hpp).
#pragma once

#include "base/result.hpp"
#include "base/settings.hpp"

#include <string>
#include <string_view>

namespace kiln::detail {

// The lines between which the page holds the generated table.
inline constexpr std::string_view kSettingsPageBegin =
    "<!-- Generated from runtime/src/base/settings.hpp by `ninja -C build settings-page`: edit the rows there. -->\n";
inline constexpr std::string_view kSettingsPageEnd = "<!-- End of the generated table. -->\n";

// How the page names a type.
std::string_view type_name(SettingType type);

// The table, in Markdown: one line for each row of kSettings.
std::string settings_markdown();

// `page` with the text between its begin and end lines replaced by settings_markdown(); fails, saying
// which, where either line is missing or they come in the wrong order.
Result<std::string> with_settings_table(std::string_view page);

}  // namespace kiln::detail
