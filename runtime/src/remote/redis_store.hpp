// The built-in remote store: Redis, through Debian's hiredis, every request bounded in time.
#pragma once

#include "remote/config.hpp"

#include <kiln/remote.hpp>

#include <memory>

namespace kiln::detail {

// A store for the server at `address`: connections are made on first use (at most connect_timeout,
// name lookup included) and kept for reuse, one per thread that needs one at the same time; each request
// gets its whole reply within request_timeout or fails. Failures throw Error(remote) naming the server.
std::unique_ptr<RemoteStore> make_redis_store(RedisAddress address, const RemoteSettings& settings);

}  // namespace kiln::detail
