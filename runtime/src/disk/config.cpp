// The cache configuration from the environment: on/off, location, size cap.
#include <kiln/cache.hpp>

#include <pwd.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln {

namespace {

std::string_view env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string_view{} : std::string_view{value};
}

bool means_off(std::string_view v) { return v == "off" || v == "OFF" || v == "Off" || v == "0"; }

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
  if (const auto dir = env("KILN_CACHE_DIR"); !dir.empty()) return dir;
  // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (const auto xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/') return std::filesystem::path(xdg) / "kiln";
  const auto home = home_dir();
  return home.empty() ? home : home / ".cache" / "kiln";
}

// "1073741824", "512M", "2G", "64k": bytes, with an optional binary suffix K, M, G or T.
std::optional<std::uint64_t> parse_bytes(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (suffix.ends_with("iB") || suffix.ends_with("ib")) suffix.remove_suffix(2);
  unsigned shift = 0;
  if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: return std::nullopt;
    }
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  if (shift != 0 && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace

CacheConfig CacheConfig::from_environment() {
  CacheConfig config;
  config.enabled = !means_off(env("KILN_CACHE"));
  config.dir = cache_root();
  if (const auto cap = env("KILN_CACHE_MAX_BYTES"); !cap.empty()) {
    if (const auto bytes = parse_bytes(cap)) {
      config.max_bytes = *bytes;
    } else {
      // No cache object exists yet to record this; the environment is read once per process anyway.
      std::fprintf(stderr, "kiln: warning: KILN_CACHE_MAX_BYTES='%.*s' is not a size (e.g. 1073741824, 512M, 2G); "
                   "using %llu bytes\n", static_cast<int>(cap.size()), cap.data(),
                   static_cast<unsigned long long>(config.max_bytes));
    }
  }
  return config;
}

}  // namespace kiln
