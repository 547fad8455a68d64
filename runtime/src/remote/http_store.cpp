// HttpStore: the remote store on a plain HTTP(S) tree or an S3 bucket (remote/http_store.hpp).
#include "remote/http_store.hpp"

#include "remote/object_lease.hpp"

#include <kiln/error.hpp>

namespace kiln::detail {

namespace {

bool unreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

class HttpStore final : public RemoteStore {
 public:
  HttpStore(ObjectStoreAddress address, const RemoteSettings& settings)
      : address_(std::move(address)), client_(address_.target), max_value_bytes_(settings.max_value_bytes) {}

  std::string where() const override { return address_.where; }

  std::optional<std::string> get(const std::string& key) override {
    HttpResponse r = send("GET", key, {}, {}, max_value_bytes_);
    if (r.too_large)
      throw RemoteBadValue("its value is " + (r.announced > 0 ? std::to_string(r.announced) + " bytes, " : std::string()) +
                           "larger than this machine's max_bytes (" + std::to_string(max_value_bytes_) +
                           " in KILN_REMOTE_CACHE), and was not read");
    if (r.status == 200) return std::move(r.body);
    if (r.status == 404 || r.status == 410) return std::nullopt;
    throw unexpected("a GET", r);
  }

  bool contains(const std::string& key) override {
    const HttpResponse r = send("HEAD", key, {}, {}, 0);
    if (r.status == 200) return true;
    if (r.status == 404 || r.status == 410) return false;
    throw unexpected("a HEAD", r);
  }

  // Written once: another machine's entry for the key is the same kernel, and a server that honours
  // If-None-Match never sees two machines replace each other's.
  RemoteReply put(const std::string& key, std::string_view value, std::chrono::milliseconds) override {
    return write(key, value, {"If-None-Match: *"});
  }

  RemoteReply put_over(const std::string& key, std::string_view value, std::chrono::milliseconds) override {
    return write(key, value, {});
  }

  RemoteReply try_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return take_object_lease(lease_send(key), token, ttl);
  }
  bool lease_held(const std::string& key, std::chrono::milliseconds ttl) override {
    return object_lease_held(lease_send(key), ttl);
  }
  bool renew_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return renew_object_lease(lease_send(key), token, ttl);
  }
  void release_lease(const std::string& key, const std::string& token) override {
    release_object_lease(lease_send(key), token);
  }

 private:
  // A lease's body is a few lines, a PUT's answer a short page: nothing but an entry is read beyond this.
  static constexpr std::uint64_t kSmallBody = 64 * 1024;

  RemoteReply write(const std::string& key, std::string_view value, std::vector<std::string> headers) {
    const HttpResponse r = send("PUT", key, value, std::move(headers), kSmallBody);
    if (r.status >= 200 && r.status < 300) return {};
    if (r.status == 412) return {};  // another machine published it first
    if (write_refused(r.status)) return {RemoteReply::refused, status_text(r)};
    throw unexpected("a PUT", r);
  }

  LeaseSend lease_send(const std::string& key) {
    return [this, key](std::string_view method, std::string_view body, std::vector<std::string> headers) {
      return send(method, key, body, std::move(headers), kSmallBody);
    };
  }

  // One request; what no store call accepts from a server throws here: a redirect (the store's address is
  // the one configured, never one a response names), a server error, a read refused (a wrong token).
  HttpResponse send(std::string_view method, const std::string& key, std::string_view body,
                    std::vector<std::string> headers, std::uint64_t max_body) {
    HttpRequest request{method, address_.base + "/" + object_path(key), body, std::move(headers), max_body};
    HttpResponse r = client_.perform(request);
    if (r.too_large && method != "GET") throw unexpected("a " + std::string(method), r);
    if (r.status >= 300 && r.status < 400)
      throw Error(Errc::remote, "it answered " + std::string(method) + " with a redirect (" + status_text(r) +
                                    "), which kiln does not follow: give the final address in KILN_REMOTE_CACHE");
    if (r.status >= 500) throw unexpected("a " + std::string(method), r);
    if ((r.status == 401 || r.status == 403) && (method == "GET" || method == "HEAD"))
      throw Error(Errc::remote, "the server refuses kiln's reads (" + status_text(r) + "): " + auth_hint());
    return r;
  }

  std::string auth_hint() const {
    if (address_.s3)
      return "check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or KILN_REMOTE_AUTH_FILE), that "
             "they may s3:GetObject and s3:ListBucket (without ListBucket S3 answers 403 for a missing object), "
             "and the region";
    return "check the token in KILN_REMOTE_AUTH_FILE and that it may read";
  }

  Error unexpected(const std::string& what, const HttpResponse& r) const {
    if (r.too_large) return Error(Errc::remote, "its answer to " + what + " is larger than expected");
    return Error(Errc::remote, "it answered " + what + " with " + status_text(r) +
                                   (address_.s3 ? " (is it an S3 endpoint, and the bucket right?)"
                                                : " (is it a WebDAV-style server that takes PUT, and the URL right?)"));
  }

  const ObjectStoreAddress address_;
  HttpClient client_;
  const std::uint64_t max_value_bytes_;
};

}  // namespace

std::string object_path(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string path;
  for (const char c : key) {
    if (c == ':') path += '/';
    else if (unreserved(c)) path += c;
    else {
      path += '%';
      path += kHex[static_cast<unsigned char>(c) >> 4];
      path += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  return path;
}

std::unique_ptr<RemoteStore> make_http_store(ObjectStoreAddress address, const RemoteSettings& settings) {
  return std::make_unique<HttpStore>(std::move(address), settings);
}

}  // namespace kiln::detail
