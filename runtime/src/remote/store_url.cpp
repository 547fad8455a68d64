// Choosing and configuring the store a URL names (remote/store_url.hpp).
#include "remote/store_url.hpp"

#include "base/settings.hpp"
#include "remote/config.hpp"
#include "remote/http_store.hpp"
#include "remote/redis_store.hpp"
#include "remote/secret_file.hpp"
#include "remote/tiered_store.hpp"

#include <openssl/evp.h>

#include <cstdlib>
#include <vector>

namespace kiln::detail {

namespace {

constexpr std::size_t kMaxAuthFileBytes = 16 * 1024;

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
  return out;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    lines.push_back(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
  }
  return lines;
}

std::string auth_origin(const RemoteConfig& config) {
  return "the remote store's credential file " + config.auth_file.string() + " (KILN_REMOTE_AUTH_FILE)";
}

// The Authorization header the auth file says: "Bearer TOKEN", "Basic USER:PASSWORD", or a bare token.
Result<std::string> http_authorization(const RemoteConfig& config, std::string& warning) {
  if (config.auth_file.empty()) return std::string();
  const std::string origin = auth_origin(config);
  auto read = read_secret_file(config.auth_file.string(), origin, "read and write the fleet's store", kMaxAuthFileBytes);
  if (!read) return fail(read.error());
  warning = read->warning;
  std::string line;
  for (const std::string_view l : lines_of(read->text))
    if (!(line = trimmed(l)).empty()) break;
  const auto bad = [&] {
    return fail(origin + ": its first line must be 'Bearer TOKEN', 'Basic USER:PASSWORD' or a bare token");
  };
  if (line.empty()) return bad();
  if (line.starts_with("Bearer ")) return "Authorization: Bearer " + trimmed(line.substr(7));
  if (line.starts_with("Basic ")) {
    const std::string pair = trimmed(line.substr(6));
    if (pair.find(':') == std::string::npos) return bad();
    return "Authorization: Basic " + base64(pair);
  }
  if (line.find_first_of(" \t") != std::string::npos) return bad();
  return "Authorization: Bearer " + line;
}

// The S3 keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), else the auth file in
// the AWS credentials file's format (its first aws_access_key_id, aws_secret_access_key, aws_session_token).
Status s3_keys(const RemoteConfig& config, HttpTarget& target, std::string& warning) {
  std::string id = setting("AWS_ACCESS_KEY_ID"), secret = setting("AWS_SECRET_ACCESS_KEY"), token = setting("AWS_SESSION_TOKEN");
  if (id.empty() && !config.auth_file.empty()) {
    const std::string origin = auth_origin(config);
    auto read = read_secret_file(config.auth_file.string(), origin, "read and write the fleet's bucket", kMaxAuthFileBytes);
    if (!read) return fail(read.error());
    warning = read->warning;
    for (const std::string_view l : lines_of(read->text)) {
      const auto eq = l.find('=');
      if (eq == std::string_view::npos) continue;
      const std::string name = trimmed(l.substr(0, eq)), value = trimmed(l.substr(eq + 1));
      if (name == "aws_access_key_id" && id.empty()) id = value;
      else if (name == "aws_secret_access_key" && secret.empty()) secret = value;
      else if (name == "aws_session_token" && token.empty()) token = value;
    }
    if (id.empty() || secret.empty())
      return fail(origin + " has no aws_access_key_id = ... and aws_secret_access_key = ... lines");
  }
  if (id.empty() || secret.empty())
    return fail("an S3 store needs credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or KILN_REMOTE_AUTH_FILE "
                "naming a file with aws_access_key_id = ... and aws_secret_access_key = ... lines");
  if (id.find(':') != std::string::npos) return fail("the S3 access key id has a ':', which no AWS key id has");
  target.sigv4_keys = id + ":" + secret;
  target.session_token = token;
  return ok();
}

std::string own(const std::vector<std::pair<std::string, std::string>>& values, std::string_view name) {
  for (const auto& [n, v] : values)
    if (n == name) return v;
  return "";
}

// An HTTP(S) or S3 store keeps its connections' TLS: more time to connect, and to move a large entry
// from another region, unless the caller chose other bounds.
void object_store_defaults(RemoteSettings& settings) {
  const RemoteSettings defaults;
  if (settings.connect_timeout == defaults.connect_timeout) settings.connect_timeout = std::chrono::milliseconds(1000);
  if (settings.request_timeout == defaults.request_timeout) settings.request_timeout = std::chrono::milliseconds(5000);
}

void bounds(HttpTarget& target, const RemoteSettings& settings) {
  target.connect_timeout = settings.connect_timeout;
  target.request_timeout = settings.request_timeout;
}

Result<ObjectStoreAddress> parse_http_url(std::string_view url, const RemoteConfig& config, RemoteSettings& settings,
                                          std::string& warning, std::string& cleartext) {
  const auto bad = [&](const std::string& why) {
    return fail("the remote cache URL '" + std::string(url) + "': " + why +
                " (expected https://host[:port]/path[?ca_file=PEM&timeout_ms=N&...], or http://)");
  };
  const std::string_view scheme = url.starts_with("https://") ? "https://" : "http://";
  std::string_view rest = url.substr(scheme.size());
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const auto slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos)
    return fail("the remote cache URL has a user or password in it: put the credential in a file of yours (chmod "
                "600) named by KILN_REMOTE_AUTH_FILE instead ('Bearer TOKEN' or 'Basic USER:PASSWORD')");
  if (authority.empty()) return bad("no host");
  while (path.ends_with('/')) path.remove_suffix(1);
  std::vector<std::pair<std::string, std::string>> values;
  object_store_defaults(settings);
  if (const Status applied = apply_query(query, {"ca_file"}, values, settings); !applied) return bad(applied.error());
  ObjectStoreAddress address;
  address.base = std::string(scheme) + std::string(authority) + std::string(path);
  address.where = address.base;
  address.target.ca_file = own(values, "ca_file");
  auto authorization = http_authorization(config, warning);
  if (!authorization) return fail(authorization.error());
  address.target.authorization = std::move(*authorization);
  // A bearer token or a password is the credential itself (SigV4 sends only signatures).
  if (scheme == "http://" && !address.target.authorization.empty())
    cleartext = "the remote cache " + address.where + " is reached over plain http://, so the credential of " +
                auth_origin(config) + " crosses the network readable by anyone on the path: use https://";
  bounds(address.target, settings);
  return address;
}

bool bucket_name(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (const char c : b)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  return true;
}

Result<ObjectStoreAddress> parse_s3_url(std::string_view url, const RemoteConfig& config, RemoteSettings& settings,
                                        std::string& warning) {
  const auto bad = [&](const std::string& why) {
    return fail("the remote cache URL '" + std::string(url) + "': " + why +
                " (expected s3://bucket[/prefix][?region=R&endpoint=https://host:port&timeout_ms=N&...])");
  };
  std::string_view rest = url.substr(5);  // "s3://"
  std::string_view query;
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const auto slash = rest.find('/');
  const std::string bucket(rest.substr(0, slash));
  std::string_view prefix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  while (prefix.starts_with('/')) prefix.remove_prefix(1);
  while (prefix.ends_with('/')) prefix.remove_suffix(1);
  if (!bucket_name(bucket)) return bad("'" + bucket + "' is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')");
  std::vector<std::pair<std::string, std::string>> values;
  object_store_defaults(settings);
  if (const Status applied = apply_query(query, {"region", "endpoint", "ca_file"}, values, settings); !applied)
    return bad(applied.error());
  std::string region = own(values, "region");
  if (region.empty()) region = setting("AWS_REGION");
  if (region.empty()) region = setting("AWS_DEFAULT_REGION");
  if (region.empty()) return bad("no region: add region=... (or set AWS_REGION)");
  for (const char c : region)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return bad("region '" + region + "' is not a region name");
  std::string endpoint = own(values, "endpoint");
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (!endpoint.empty() && !endpoint.starts_with("https://") && !endpoint.starts_with("http://"))
    return bad("endpoint=" + endpoint + " must start with https:// or http://");
  if (endpoint.find('@') != std::string::npos || endpoint.find('/', endpoint.find("//") + 2) != std::string::npos)
    return bad("endpoint=" + endpoint + " must be a scheme, a host and a port only");
  ObjectStoreAddress address;
  address.s3 = true;
  // A custom endpoint (MinIO, Ceph, R2, a test's server) is addressed by path; AWS by virtual host, except a
  // bucket with dots, whose name would not match the wildcard certificate.
  if (!endpoint.empty()) address.base = endpoint + "/" + bucket;
  else if (bucket.find('.') != std::string::npos) address.base = "https://s3." + region + ".amazonaws.com/" + bucket;
  else address.base = "https://" + bucket + ".s3." + region + ".amazonaws.com";
  if (!prefix.empty()) address.base += "/" + std::string(prefix);
  address.where = "s3://" + bucket + (prefix.empty() ? "" : "/" + std::string(prefix)) + " (" + region +
                  (endpoint.empty() ? "" : " at " + endpoint) + ")";
  address.target.ca_file = own(values, "ca_file");
  address.target.sigv4 = "aws:amz:" + region + ":s3";
  if (const Status keys = s3_keys(config, address.target, warning); !keys) return fail(keys.error());
  bounds(address.target, settings);
  return address;
}

bool object_url(std::string_view url) {
  return url.starts_with("https://") || url.starts_with("http://") || url.starts_with("s3://");
}

Result<ChosenStore> one_store(std::string_view url, const RemoteConfig& config, RemoteSettings& settings) {
  ChosenStore chosen;
  if (object_url(url)) {
    auto address = url.starts_with("s3://") ? parse_s3_url(url, config, settings, chosen.warning)
                                            : parse_http_url(url, config, settings, chosen.warning, chosen.cleartext);
    if (!address) return fail(address.error());
    chosen.where = address->where;
    chosen.expiry = Expiry::server;
    chosen.store = make_http_store(std::move(address).value(), settings);
    return chosen;
  }
  auto address = parse_redis_url(url, settings);
  if (!address) return fail(address.error());
  chosen.where = address->where();
  chosen.store = make_redis_store(std::move(address).value(), settings);
  return chosen;
}

}  // namespace

Result<ChosenStore> store_from_url(const RemoteConfig& config, RemoteSettings& settings, StoreFailed failed) {
  std::vector<std::string_view> urls;
  std::string_view text = config.url;
  while (!text.empty()) {
    const auto space = text.find_first_of(" \t\n");
    if (space != 0) urls.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  if (urls.size() == 1) return one_store(urls[0], config, settings);
  const bool pair = urls.size() == 2 && (object_url(urls[0]) != object_url(urls[1]));
  if (!pair)
    return fail("KILN_REMOTE_CACHE names " + std::to_string(urls.size()) + " stores: it takes one URL, or a redis:// "
                "URL and an https://, http:// or s3:// one separated by a space (leases on Redis, entries read through it)");
  const std::string_view redis_url = object_url(urls[0]) ? urls[1] : urls[0];
  const std::string_view objects_url = object_url(urls[0]) ? urls[0] : urls[1];
  // Redis first: it keeps its own bounds, the object store's longer defaults being for TLS across regions.
  auto redis = one_store(redis_url, config, settings);
  if (!redis) return fail(redis.error());
  auto objects = one_store(objects_url, config, settings);
  if (!objects) return fail(objects.error());
  ChosenStore chosen;
  chosen.where = redis->where + " + " + objects->where;
  chosen.expiry = Expiry::ttl_then_server;
  chosen.warning = objects->warning;
  chosen.cleartext = objects->cleartext;
  chosen.store = make_tiered_store(std::move(redis->store), std::move(objects->store),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(settings.ttl),
                                   settings.retry_after, std::move(failed));
  return chosen;
}

}  // namespace kiln::detail
