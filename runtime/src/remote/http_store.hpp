// The remote stores over HTTP(S): a plain tree of objects under a base URL (WebDAV-style: GET, HEAD, PUT,
// DELETE of <base>/kiln/<key id>/entry/<key hex>, as nginx's dav module or Apache's mod_dav serve it), and
// S3-compatible object stores, the same requests signed with AWS SigV4.
#pragma once

#include "remote/http_client.hpp"

#include <kiln/remote.hpp>

#include <memory>
#include <string>

namespace kiln::detail {

struct ObjectStoreAddress {
  std::string base;   // "https://host:port/path", no trailing '/': an object's URL is base + "/" + its path
  std::string where;  // for messages: "https://host:port/path", "s3://bucket/prefix (region)"
  bool s3 = false;    // says "S3" in messages (the signing is in target)
  HttpTarget target;
};

// The path of a store key in the tree: "kiln:<id>:entry:<hex>" -> "kiln/<id>/entry/<hex>" (every other
// byte percent-encoded), so that a server's tree holds one directory per fleet key and kind.
std::string object_path(std::string_view key);

// Entries are written once (If-None-Match: *; a 412 means another machine published first) unless
// RemoteStore::put_over replaces one; 401/403 on a write is a refusal (a read-only token), on a read a
// failure. Leases are objects too (remote/object_lease.hpp). Failures throw Error(remote).
std::unique_ptr<RemoteStore> make_http_store(ObjectStoreAddress address, const RemoteSettings& settings);

}  // namespace kiln::detail
