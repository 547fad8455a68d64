// What the HTTP and S3 stores' tests share: remote caches with a credential file, the store's names.
#pragma once

#include "http_servers.hpp"
#include "remote/remote_state.hpp"
#include "remote_test_util.hpp"

#include <filesystem>
#include <memory>
#include <string>

namespace kiln::test {

// A remote cache at `url` with `auth_file` as KILN_REMOTE_AUTH_FILE (none when empty).
inline std::unique_ptr<RemoteCache> remote_with(const std::string& url, const std::filesystem::path& auth_file = {}) {
  RemoteConfig config = remote_config(url);
  config.auth_file = auth_file;
  return std::make_unique<RemoteCache>(config);
}

// The object path of a unit's entry or lease under a base directory: kiln/<key id>/entry/<hex>.
inline std::filesystem::path entry_file(const std::filesystem::path& base, const std::string& hex) {
  return base / "kiln" / fleet_key_id(kFleetKey) / "entry" / hex;
}
inline std::filesystem::path lease_file(const std::filesystem::path& base, const std::string& hex) {
  return base / "kiln" / fleet_key_id(kFleetKey) / "lease" / hex;
}

inline RemoteStore& store_of(RemoteCache& remote) { return *detail::remote_state(remote).store; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The S3 test server's keys, in the AWS credentials file's format.
inline std::filesystem::path s3_credentials(const std::filesystem::path& dir, const std::string& secret = ObjectServer::kSecretKey) {
  return write_secret(dir / "credentials", std::string("[default]\naws_access_key_id = ") + ObjectServer::kAccessKey +
                                               "\naws_secret_access_key = " + secret + "\n");
}

}  // namespace kiln::test
