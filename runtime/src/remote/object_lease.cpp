// Leases as objects (remote/object_lease.hpp has the protocol).
#include "remote/object_lease.hpp"

#include <kiln/error.hpp>

#include <chrono>
#include <optional>

namespace kiln::detail {

namespace {

constexpr std::string_view kMagic = "kiln lease 1\n";

struct Lease {
  std::string token;
  std::int64_t ttl_ms = 0;
  std::int64_t expires_ms = 0;  // the holder's clock: used only where the server gives no times
};

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string lease_body(const std::string& token, std::chrono::milliseconds ttl) {
  return std::string(kMagic) + "token " + token + "\nttl_ms " + std::to_string(ttl.count()) + "\nexpires_ms " +
         std::to_string(wall_ms() + ttl.count()) + "\n";
}

std::optional<Lease> parse(std::string_view body) {
  if (!body.starts_with(kMagic)) return std::nullopt;
  body.remove_prefix(kMagic.size());
  Lease lease;
  while (!body.empty()) {
    const auto eol = body.find('\n');
    const std::string_view line = body.substr(0, eol);
    body = eol == std::string_view::npos ? std::string_view{} : body.substr(eol + 1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, space), value = line.substr(space + 1);
    try {
      if (name == "token") lease.token = std::string(value);
      else if (name == "ttl_ms") lease.ttl_ms = std::stoll(std::string(value));
      else if (name == "expires_ms") lease.expires_ms = std::stoll(std::string(value));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (lease.token.empty() || lease.ttl_ms <= 0) return std::nullopt;
  return lease;
}

// Not renewed within its ttl by the server's clock (Last-Modified has whole seconds: one more is allowed);
// by the holder's where the server sends no times.
bool expired(const Lease& lease, const HttpResponse& r) {
  if (r.date >= 0 && r.last_modified >= 0) return (r.date - r.last_modified) * 1000 > lease.ttl_ms + 1000;
  return wall_ms() > lease.expires_ms;
}

bool success(long status) { return status >= 200 && status < 300; }

std::string if_match(const std::string& etag) { return "If-Match: " + etag; }

// After a write that said yes: the lease is this process's only if its token is there now (a server that
// ignores If-None-Match lets a later writer replace it).
RemoteReply confirm(const LeaseSend& send, const std::string& token) {
  const HttpResponse r = send("GET", {}, {});
  if (r.status != 200) return {RemoteReply::held, {}};
  const auto lease = parse(r.body);
  return lease && lease->token == token ? RemoteReply{} : RemoteReply{RemoteReply::held, {}};
}

Error unexpected(std::string_view what, const HttpResponse& r) {
  return Error(Errc::remote, "it answered " + std::string(what) + " of a lease with " + status_text(r));
}

}  // namespace

bool write_refused(long status) {
  return status == 401 || status == 403 || status == 405 || status == 409 || status == 413 || status == 507;
}

RemoteReply take_object_lease(const LeaseSend& send, const std::string& token, std::chrono::milliseconds ttl) {
  const std::string body = lease_body(token, ttl);
  // Looked at first: a server that ignores If-None-Match would otherwise let every taker replace a live
  // lease. The conditional PUT then settles a race where the server honours it, the read-back elsewhere.
  const HttpResponse there = send("GET", {}, {});
  std::vector<std::string> condition;
  if (there.status == 404 || there.status == 410) {
    condition.push_back("If-None-Match: *");
  } else if (there.status == 200) {
    const auto lease = parse(there.body);
    // A lease that is no lease, an expired one, or one that would outlive ours (no holder of this fleet's
    // settings sets it, and waiting on it would stall every machine until wait_ms): taken over.
    if (lease && !expired(*lease, there) && lease->ttl_ms <= ttl.count()) return {RemoteReply::held, {}};
    if (!there.etag.empty()) condition.push_back(if_match(there.etag));
  } else {
    throw unexpected("a GET", there);
  }
  const HttpResponse put = send("PUT", body, condition);
  if (success(put.status)) return confirm(send, token);
  if (write_refused(put.status)) return {RemoteReply::refused, status_text(put)};
  if (put.status == 412) return {RemoteReply::held, {}};  // another taker was first
  throw unexpected("a PUT", put);
}

bool object_lease_held(const LeaseSend& send, std::chrono::milliseconds ttl) {
  const HttpResponse r = send("GET", {}, {});
  if (r.status == 404) return false;
  if (r.status != 200) throw unexpected("a GET", r);
  const auto lease = parse(r.body);
  return lease && !expired(*lease, r) && lease->ttl_ms <= ttl.count();
}

bool renew_object_lease(const LeaseSend& send, const std::string& token, std::chrono::milliseconds ttl) {
  const HttpResponse r = send("GET", {}, {});
  if (r.status != 200) return false;
  const auto lease = parse(r.body);
  if (!lease || lease->token != token) return false;
  std::vector<std::string> condition;
  if (!r.etag.empty()) condition.push_back(if_match(r.etag));
  return success(send("PUT", lease_body(token, ttl), condition).status);
}

void release_object_lease(const LeaseSend& send, const std::string& token) {
  const HttpResponse r = send("GET", {}, {});
  if (r.status != 200) return;
  const auto lease = parse(r.body);
  if (!lease || lease->token != token) return;
  std::vector<std::string> condition;
  if (!r.etag.empty()) condition.push_back(if_match(r.etag));
  (void)send("DELETE", {}, condition);  // refused or gone: it expires by itself
}

}  // namespace kiln::detail
