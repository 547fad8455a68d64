// HttpClient: libcurl's easy interface, every option that bounds a request set on each one.
#include "remote/http_client.hpp"

#include "chain/key.hpp"  // sha256_hex: SigV4's payload hash
#include "remote/sigpipe_blocked.hpp"

#include <kiln/error.hpp>

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace kiln::detail {

// A libcurl handle, owned: the type of HttpClient::Pool's members, so outside the anonymous namespace (a
// class with linkage may not hold one of its types where this file is compiled inside another: a unity build).
struct EasyFree {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
using Easy = std::unique_ptr<CURL, EasyFree>;

namespace {

// Once per process, before any handle: curl_global_init is not thread-safe (libcurl before 7.84).
void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct ListFree {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using List = std::unique_ptr<curl_slist, ListFree>;

struct Reading {
  HttpResponse* response;
  std::uint64_t max_body;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<Reading*>(user);
  const size_t n = size * count;
  if (r->response->body.size() + n > r->max_body) {
    r->response->too_large = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR), and the connection with it
  }
  r->response->body.append(data, n);
  return n;
}

bool starts_with_nocase(std::string_view line, std::string_view prefix) {
  return line.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), line.begin(),
                    [](char p, char l) { return p == std::tolower(static_cast<unsigned char>(l)); });
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<HttpResponse*>(user);
  const std::string_view line(data, size * count);
  if (line.starts_with("HTTP/")) {  // a new response (after a 100 Continue): forget the last one's
    r->etag.clear();
    r->date = -1;
    r->content_length = -1;
  } else if (starts_with_nocase(line, "content-length:")) {
    try {
      r->content_length = static_cast<std::int64_t>(std::stoull(trimmed(line.substr(15))));
    } catch (const std::exception&) {
      r->content_length = -1;
    }
  } else if (starts_with_nocase(line, "etag:")) {
    r->etag = trimmed(line.substr(5));
  } else if (starts_with_nocase(line, "date:")) {
    const std::string text = trimmed(line.substr(5));
    const time_t t = curl_getdate(text.c_str(), nullptr);
    r->date = t < 0 ? -1 : static_cast<std::int64_t>(t);
  }
  return size * count;
}

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

}  // namespace

struct HttpClient::Pool {
  std::mutex mutex;
  pid_t owner = ::getpid();
  std::vector<Easy> idle;
};

HttpClient::HttpClient(HttpTarget target) : target_(std::move(target)), pool_(std::make_unique<Pool>()) { init_curl(); }
HttpClient::~HttpClient() = default;

HttpResponse HttpClient::perform(const HttpRequest& request) {
  constexpr std::size_t kMaxIdle = 16;
  Easy easy;
  {
    const std::lock_guard lock(pool_->mutex);
    // A forked child must not talk on its parent's connections (nor their TLS sessions).
    if (pool_->owner != ::getpid()) {
      for (Easy& e : pool_->idle) (void)e.release();  // the parent's: not cleaned up here
      pool_->idle.clear();
      pool_->owner = ::getpid();
    }
    if (!pool_->idle.empty()) {
      easy = std::move(pool_->idle.back());
      pool_->idle.pop_back();
    }
  }
  if (!easy) easy.reset(curl_easy_init());
  if (!easy) throw Error(Errc::remote, "cannot make a curl handle");
  CURL* c = easy.get();
  curl_easy_reset(c);  // every option set below again; live connections and TLS sessions are kept

  HttpResponse response;
  Reading reading{&response, request.max_body};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is an answer the store refuses
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);        // no alarm(), no process-wide SIGPIPE handler
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(target_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(target_.request_timeout.count()));
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!target_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, target_.ca_file.c_str());
  // A HEAD's Content-Length is the object's, not an answer to read.
  if (request.method != "HEAD") curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(request.max_body));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reading);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(c, CURLOPT_FILETIME, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // the store's address as given, never an environment's proxy

  List headers;
  const auto add = [&](const std::string& line) {
    curl_slist* more = curl_slist_append(headers.get(), line.c_str());
    if (more == nullptr) throw Error(Errc::remote, "cannot make a request's headers");
    (void)headers.release();
    headers.reset(more);
  };
  for (const std::string& h : request.headers) add(h);
  add("Expect:");  // no 100-continue round trip before a PUT's body
  if (!target_.authorization.empty()) add(target_.authorization);
  if (!target_.sigv4.empty()) {
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, target_.sigv4.c_str());
    curl_easy_setopt(c, CURLOPT_USERPWD, target_.sigv4_keys.c_str());
    // S3 wants the payload's hash in a header of its own; curl signs the headers it is given.
    add("x-amz-content-sha256: " + sha256_hex(request.body));
    if (!target_.session_token.empty()) add("x-amz-security-token: " + target_.session_token);
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    add("Content-Type: application/octet-stream");
  } else if (request.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, std::string(request.method).c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);

  CURLcode rc;
  {
    const SigpipeBlocked no_sigpipe;
    rc = curl_easy_perform(c);
  }
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, nullptr);
  if (rc == CURLE_FILESIZE_EXCEEDED || (rc == CURLE_WRITE_ERROR && response.too_large)) {
    response.too_large = true;
    if (response.content_length > 0) response.announced = static_cast<std::uint64_t>(response.content_length);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
    response.body.clear();
    return response;  // the handle goes: curl closed the connection it was reading
  }
  if (rc != CURLE_OK) {
    std::string why = error[0] != '\0' ? std::string(error) : curl_easy_strerror(rc);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    if (rc == CURLE_OPERATION_TIMEDOUT)
      why = "no whole answer within " + ms_text(target_.request_timeout) + " (" + why + ")";
    throw Error(Errc::remote, std::string(request.method) + " " + request.url + ": " + why);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  curl_off_t filetime = -1;
  if (curl_easy_getinfo(c, CURLINFO_FILETIME_T, &filetime) == CURLE_OK && filetime >= 0)
    response.last_modified = static_cast<std::int64_t>(filetime);
  {
    const std::lock_guard lock(pool_->mutex);
    if (pool_->owner == ::getpid() && pool_->idle.size() < kMaxIdle) pool_->idle.push_back(std::move(easy));
  }
  return response;
}

std::string status_text(const HttpResponse& response) {
  std::string text = "HTTP " + std::to_string(response.status);
  std::string_view body = response.body;
  body = body.substr(0, body.find('\n'));
  if (!body.empty() && body.size() <= 200 &&
      std::all_of(body.begin(), body.end(), [](char ch) { return ch >= 0x20 && ch < 0x7f; }))
    text += " (" + std::string(body) + ")";
  return text;
}

}  // namespace kiln::detail
