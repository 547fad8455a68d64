// The store KILN_REMOTE_CACHE names: Redis (redis://), an HTTP(S) tree (https://, http://), an S3 bucket
// (s3://), or a Redis and one of the others separated by a space (remote/tiered_store.hpp).
#pragma once

#include "base/result.hpp"
#include "remote/tiered_store.hpp"  // StoreFailed

#include <kiln/remote.hpp>

#include <memory>
#include <string>

namespace kiln::detail {

// Who expires the store's entries: the tier's ttl_s (Redis), the server's own rules (an HTTP tree, an S3
// lifecycle rule: the objects are written with no expiry), or both (Redis's copies, then the objects).
enum class Expiry { ttl, server, ttl_then_server };

struct ChosenStore {
  std::unique_ptr<RemoteStore> store;
  Expiry expiry = Expiry::ttl;
  std::string where;    // the store, for messages (no credential in it)
  std::string warning;    // empty, or why the credential's file wants chmod 600
  std::string cleartext;  // empty, or that a token goes over plain http:// (anyone on the path reads it)
};

// The store config.url names, nothing connected yet; the URLs' settings are written into `settings`. A
// failure names the URL (credentials redacted), the part that is wrong and what it must be. `failed` is
// told of a call one store of a pair failed while the other served (a Redis and an object store).
Result<ChosenStore> store_from_url(const RemoteConfig& config, RemoteSettings& settings, StoreFailed failed);

}  // namespace kiln::detail
