// The remote tier's configuration: the environment, the Redis URL and its settings, the fleet key.
#include "remote/config.hpp"

#include "base/parse.hpp"
#include "base/private_dir.hpp"
#include "base/settings.hpp"
#include "remote/secret_file.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <utility>
#include <vector>

namespace kiln {

namespace {

// A key longer than this is not a key file but something else named by mistake.
constexpr std::size_t kMaxKeyFileBytes = 4096;
constexpr std::size_t kMinKeyBytes = 16;

constexpr std::string_view kMakeKey =
    "make one with `head -c 32 /dev/urandom | base64 > fleet.key; chmod 600 fleet.key` and give every machine "
    "of the fleet the same file";

std::optional<std::uint64_t> number(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoding, as URLs carry passwords with reserved characters.
detail::Result<std::string> percent_decoded(std::string_view text, std::string_view what) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const int hi = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) return detail::fail("the " + std::string(what) + " has a '%' not followed by two hex digits");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// The URL without its user and password, for messages.
std::string redacted(std::string_view url) {
  const auto at = url.find('@');
  const auto start = url.find("://");
  if (at == std::string_view::npos || start == std::string_view::npos || start > at) return std::string(url);
  return std::string(url.substr(0, start + 3)) + "***" + std::string(url.substr(at));
}

detail::Status apply_setting_impl(std::string_view name, std::string_view value, RemoteSettings& s) {
  using detail::fail;
  if (name == "mode") {
    if (value != "ro" && value != "rw") return fail("mode=" + std::string(value) + " is neither ro nor rw");
    s.read_only = value == "ro";
    return detail::ok();
  }
  constexpr std::string_view kKnown = "mode, connect_timeout_ms, timeout_ms, ttl_s, max_bytes, lease_ms, wait_ms, retry_ms";
  if (name != "connect_timeout_ms" && name != "timeout_ms" && name != "ttl_s" && name != "max_bytes" &&
      name != "lease_ms" && name != "wait_ms" && name != "retry_ms")
    return fail("unknown setting '" + std::string(name) + "' (known: " + std::string(kKnown) + ")");
  const auto n = number(value);
  if (!n || *n == 0) return fail(std::string(name) + "=" + std::string(value) + " is not a positive whole number");
  const auto ms = std::chrono::milliseconds(static_cast<std::int64_t>(std::min<std::uint64_t>(*n, 86'400'000)));
  if (name == "connect_timeout_ms") s.connect_timeout = ms;
  else if (name == "timeout_ms") s.request_timeout = ms;
  else if (name == "ttl_s") s.ttl = std::chrono::seconds(static_cast<std::int64_t>(std::min<std::uint64_t>(*n, 1ull << 40)));
  else if (name == "max_bytes") s.max_value_bytes = *n;
  else if (name == "lease_ms") s.lease_ttl = std::max(ms, std::chrono::milliseconds(30));
  else if (name == "wait_ms") s.lease_wait = ms;
  else s.retry_after = ms;  // retry_ms: the names were checked above
  return detail::ok();
}

}  // namespace

RemoteConfig RemoteConfig::from_environment() {
  RemoteConfig config;
  config.url = detail::setting("KILN_REMOTE_CACHE");
  config.fleet_key = detail::setting("KILN_REMOTE_KEY");
  config.fleet_key_file = detail::setting("KILN_REMOTE_KEY_FILE");
  config.auth_file = detail::setting("KILN_REMOTE_AUTH_FILE");
  return config;
}

namespace detail {

Status apply_remote_setting(std::string_view name, std::string_view value, RemoteSettings& settings) {
  return apply_setting_impl(name, value, settings);
}

Status apply_query(std::string_view query, std::initializer_list<std::string_view> own,
                   std::vector<std::pair<std::string, std::string>>& own_values, RemoteSettings& settings) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return fail("setting '" + std::string(item) + "' has no '=value'");
    const std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    if (std::find(own.begin(), own.end(), name) != own.end()) {
      if (value.empty()) return fail(std::string(name) + "= is empty");
      own_values.emplace_back(name, value);
    } else if (const Status applied = apply_setting_impl(name, value, settings); !applied) {
      if (own.size() == 0) return applied;
      return fail(applied.error() + " (this store's own: " + [&] {
        std::string list;
        for (const std::string_view o : own) list += (list.empty() ? "" : ", ") + std::string(o);
        return list;
      }() + ")");
    }
  }
  return ok();
}

bool remote_off(std::string_view url) {
  if (url.empty()) return true;
  const auto on = parse_switch(url);
  return on.ok() && !*on;  // "off", "0", "false", "no"; anything else must be a URL (or is one warning)
}

std::string RedisAddress::where() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "redis://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/" + std::to_string(db);
}

Result<RedisAddress> parse_redis_url(std::string_view url, RemoteSettings& settings) {
  const auto bad = [&](const std::string& why) {
    return fail("the remote cache URL '" + redacted(url) + "': " + why +
                " (expected redis://[[user]:password@]host[:port][/db][?mode=ro&timeout_ms=N&...])");
  };
  constexpr std::string_view kScheme = "redis://";
  if (url.starts_with("rediss://"))
    return bad("TLS (rediss://) is not supported by the hiredis kiln links; reach the server through a TLS tunnel "
               "(stunnel, spiped) on a local port");
  if (!url.starts_with(kScheme))
    return bad("the scheme must be redis://, or https://, http:// or s3:// for an object store");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view path;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    path = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  RedisAddress address;
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = userinfo.find(':');
    // As redis-cli reads it: user:password, :password, or a lone password.
    auto user = percent_decoded(colon == std::string_view::npos ? "" : userinfo.substr(0, colon), "user");
    auto password = percent_decoded(colon == std::string_view::npos ? userinfo : userinfo.substr(colon + 1), "password");
    if (!user) return bad(user.error());
    if (!password) return bad(password.error());
    address.user = std::move(*user);
    address.password = std::move(*password);
  }
  std::string_view port;
  if (rest.starts_with('[')) {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 host needs its closing ']'");
    address.host = std::string(rest.substr(1, close - 1));
    const std::string_view after = rest.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return bad("after ']' only ':port' may follow");
    port = after.empty() ? after : after.substr(1);
  } else {
    const auto colon = rest.find(':');
    address.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (address.host.empty()) return bad("no host");
  if (!port.empty()) {
    const auto p = number(port);
    if (!p || *p == 0 || *p > 65535) return bad("port '" + std::string(port) + "' is not a number from 1 to 65535");
    address.port = static_cast<unsigned>(*p);
  }
  if (!path.empty()) {
    const auto db = number(path);
    if (!db || *db > 1'000'000) return bad("database '" + std::string(path) + "' is not a number");
    address.db = static_cast<unsigned>(*db);
  }
  std::vector<std::pair<std::string, std::string>> none;  // a Redis URL has no settings of its own
  if (const Status applied = apply_query(query, {}, none, settings); !applied) return bad(applied.error());
  return address;
}

Result<FleetKeyText> load_fleet_key(const RemoteConfig& config) {
  std::string key = config.fleet_key;
  std::string warning;
  std::string origin = "KILN_REMOTE_KEY";
  if (key.empty()) {
    if (config.fleet_key_file.empty())
      return fail("no fleet key: without one no entry could be verified. Set KILN_REMOTE_KEY_FILE to a file holding "
                  "the fleet's key (or KILN_REMOTE_KEY to the key); " + std::string(kMakeKey));
    const std::string file = config.fleet_key_file.string();
    origin = "the fleet key file " + file + " (KILN_REMOTE_KEY_FILE)";
    // Whoever can replace the key can make this process trust their entries; whoever can read it can tag
    // entries that every machine of the fleet runs.
    auto read = read_secret_file(file, origin, "publish kernels the fleet runs", kMaxKeyFileBytes);
    if (!read) return fail(read.error());
    key = std::move(read->text);
    warning = std::move(read->warning);
    // Whoever can rename entries of its directory can put their key in its place, as good as writing it.
    if (const Status dir = vet_directory_of(config.fleet_key_file); !dir)
      warning += (warning.empty() ? "" : "; ") + origin + ": " + dir.error();
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  }
  if (key.size() < kMinKeyBytes)
    return fail(origin + " holds " + std::to_string(key.size()) + " bytes; a fleet key needs at least " +
                std::to_string(kMinKeyBytes) + ": " + std::string(kMakeKey));
  return FleetKeyText{std::move(key), std::move(warning)};
}

}  // namespace detail
}  // namespace kiln
