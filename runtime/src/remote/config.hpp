// What KILN_REMOTE_CACHE and the fleet key variables say: a Redis server, the remote tier's settings, the key.
#pragma once

#include "base/result.hpp"

#include <kiln/remote.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::detail {

// One `name=value` of a store URL's query (remote.hpp names them) into `settings`; or why not.
Status apply_remote_setting(std::string_view name, std::string_view value, RemoteSettings& settings);

// A store URL's query ("name=value&..."): the names in `own` (the store's own settings, e.g. an S3 store's
// region) into `own_values`, every other into `settings` as apply_remote_setting; or why not.
Status apply_query(std::string_view query, std::initializer_list<std::string_view> own,
                   std::vector<std::pair<std::string, std::string>>& own_values, RemoteSettings& settings);

// "", or a switch that says off ("off", "0", "false", "no", any case): no remote tier.
bool remote_off(std::string_view url);

struct RedisAddress {
  std::string host;      // a name or an address (an IPv6 one without its brackets)
  unsigned port = 6379;
  unsigned db = 0;
  std::string user;      // AUTH user password (Redis 6 ACLs); empty: AUTH password, or none
  std::string password;  // empty: no AUTH

  // "redis://host:port/db", never with the password: for messages.
  std::string where() const;
};

// redis://[[user]:password@]host[:port][/db][?name=value&...] (user and password may be %-encoded).
// The query's settings (remote.hpp names them) are written into `settings`. A failure names the part of
// the URL that is wrong and what it must be.
Result<RedisAddress> parse_redis_url(std::string_view url, RemoteSettings& settings);

// The fleet key: config.fleet_key, else the contents of config.fleet_key_file (a trailing newline
// dropped), at least 16 bytes; else why there is none (and how to make one). A key file others can read
// is used, with a warning in `warning` (it is a publishing credential); one they can write is refused.
struct FleetKeyText {
  std::string key;
  std::string warning;  // empty, or one line saying to chmod 600 the file
};
Result<FleetKeyText> load_fleet_key(const RemoteConfig& config);

}  // namespace kiln::detail
