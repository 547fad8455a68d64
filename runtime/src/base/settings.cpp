// The process's one reading of the environment variables kiln reads (base/settings.hpp).
#include "base/settings.hpp"

#include <array>
#include <cstdlib>
#include <mutex>
#include <optional>

namespace kiln::detail {

namespace {

using Values = std::array<std::string, kSettingCount>;

Values read_environment() {
  Values values;
  for (std::size_t i = 0; i < kSettingCount; ++i) {
    const std::string name(kSettings[i].name);
    if (const char* value = std::getenv(name.c_str())) values[i] = value;
  }
  return values;
}

struct Snapshot {
  std::mutex mutex;
  std::optional<Values> values;  // read at the first call
};

// Never destroyed: a thread still running at exit may read a setting.
Snapshot& snapshot() {
  static Snapshot& s = *new Snapshot;
  return s;
}

}  // namespace

std::string setting(SettingName name) {
  Snapshot& s = snapshot();
  const std::lock_guard lock(s.mutex);
  if (!s.values) s.values = read_environment();
  return (*s.values)[name.index()];
}

void reread_settings() {
  Snapshot& s = snapshot();
  Values values = read_environment();
  const std::lock_guard lock(s.mutex);
  s.values = std::move(values);
}

}  // namespace kiln::detail
