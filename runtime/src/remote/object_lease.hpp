// A fleet lease as an object in an HTTP or S3 store, for where no Redis holds the leases: looked at, then
// created with a conditional PUT (If-None-Match: *), so that of two takers one gets 412; renewed and
// released by its holder only (If-Match: the ETag it read). Its body says whose it is and for how long; the server's Date
// and Last-Modified say how old it is, so machines' clocks need not agree. A lease not renewed within its
// ttl (and a second, Last-Modified's resolution) is expired, and taken over with If-Match on its ETag.
//
// Atomic only where the server honours the conditions (S3 since 2024, MinIO, Apache's mod_dav). nginx's
// dav module ignores them: a taker takes only a lease it found absent or stale, reads it back after
// writing it and holds it only if its own token is there, which leaves a window of about one round trip
// in which two machines both build (the
// same entry: a waste, never a wrong kernel). docs/DESIGN.md, "The remote tier", says so.
#pragma once

#include "remote/http_client.hpp"

#include <kiln/remote.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

// One request to the lease's URL: method, body, extra headers; the store's checks applied (a redirect,
// a 5xx or a refused read throws).
using LeaseSend = std::function<HttpResponse(std::string_view method, std::string_view body, std::vector<std::string> headers)>;

RemoteReply take_object_lease(const LeaseSend& send, const std::string& token, std::chrono::milliseconds ttl);
bool object_lease_held(const LeaseSend& send, std::chrono::milliseconds ttl);
bool renew_object_lease(const LeaseSend& send, const std::string& token, std::chrono::milliseconds ttl);
void release_object_lease(const LeaseSend& send, const std::string& token);

// Whether a write's status is the store saying no (the token may not write, the server takes no PUT, it is
// full), not a failure.
bool write_refused(long status);

}  // namespace kiln::detail
