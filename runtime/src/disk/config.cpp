// The cache configuration from the environment: on/off, location, size cap, lock wait.
#include <kiln/cache.hpp>

#include "base/parse.hpp"
#include "base/settings.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace {

constexpr std::uint64_t kMaxLockTimeoutSeconds = 7 * 24 * 3600;  // a week: anything longer is a typo

std::string_view env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string_view{} : std::string_view{value};
}

std::filesystem::path home_dir() {
  if (const auto home = env("HOME"); !home.empty()) return home;
  // No HOME (a daemon, a minimal container): the password database still knows where it is.
  std::vector<char> buffer(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] != '\0')
    return found->pw_dir;
  return {};
}

std::filesystem::path cache_root() {
  if (const auto dir = detail::setting("KILN_CACHE_DIR"); !dir.empty()) return dir;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const auto xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') return std::filesystem::path(xdg) / "kiln";
  const auto home = home_dir();
  return home.empty() ? home : home / ".cache" / "kiln";
}

// No cache object exists yet to record a warning; the settings are read once per process anyway.
void warn(const char* variable, const std::string& why, const std::string& instead) {
  std::fprintf(stderr, "kiln: warning: %s=%s; using %s\n", variable, why.c_str(), instead.c_str());
}

}  // namespace

CacheConfig CacheConfig::from_environment() {
  CacheConfig config;
  if (const auto on = detail::setting("KILN_CACHE"); !on.empty()) {
    if (const auto parsed = detail::parse_switch(on)) config.enabled = *parsed;
    else warn("KILN_CACHE", parsed.error(), "the disk cache");
  }
  config.dir = cache_root();
  if (const auto cap = detail::setting("KILN_CACHE_MAX_BYTES"); !cap.empty()) {
    if (const auto bytes = detail::parse_size(cap)) config.max_bytes = *bytes;
    else warn("KILN_CACHE_MAX_BYTES", bytes.error(), std::to_string(config.max_bytes) + " bytes");
  }
  if (const auto wait = detail::setting("KILN_CACHE_LOCK_TIMEOUT"); !wait.empty()) {
    if (const auto seconds = detail::parse_count(wait, 0, kMaxLockTimeoutSeconds))
      config.lock_timeout = std::chrono::seconds(*seconds);
    else warn("KILN_CACHE_LOCK_TIMEOUT", seconds.error(), std::to_string(config.lock_timeout.count()) + " seconds");
  }
  return config;
}

}  // namespace kiln
