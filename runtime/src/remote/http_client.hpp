// One HTTP(S) request at a time per thread, through libcurl (Debian's libcurl4-openssl-dev), bounded: the
// connection (name lookup and TLS included) within connect_timeout, the whole exchange within
// request_timeout, a response body within its cap; TLS verified, redirects never followed, only http and
// https spoken. Connections are kept for reuse: one curl handle per thread that needs one at the same time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::detail {

// How to reach and authenticate to a server; the same for every request of a store.
struct HttpTarget {
  std::string ca_file;          // PEM of the CAs to trust instead of the system's; empty: the system's
  std::string authorization;    // a whole "Authorization: ..." header line (bearer or basic); empty: none
  std::string sigv4;            // "aws:amz:<region>:s3": sign each request with AWS SigV4; empty: no signing
  std::string sigv4_keys;       // "<access key id>:<secret access key>" for sigv4
  std::string session_token;    // AWS_SESSION_TOKEN, sent as x-amz-security-token; empty: none
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds request_timeout{5000};
};

struct HttpRequest {
  std::string_view method;           // GET, HEAD, PUT or DELETE
  std::string url;
  std::string_view body;             // PUT's
  std::vector<std::string> headers;  // extra header lines ("If-None-Match: *")
  std::uint64_t max_body = 0;        // no response body is read beyond this many bytes
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string etag;                  // as the server wrote it, quotes included; empty when none
  std::int64_t date = -1;            // the server's Date, seconds since the epoch; -1 when none
  std::int64_t last_modified = -1;   // Last-Modified likewise
  std::int64_t content_length = -1;  // the Content-Length it announced; -1 when none
  bool too_large = false;            // the body was over max_body (announced or sent): not read
  std::uint64_t announced = 0;       // content_length, when too_large and there was one
};

class HttpClient {
 public:
  explicit HttpClient(HttpTarget target);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The server's whole response (any status), or too_large. Throws Error(remote) when none came: refused,
  // reset, timed out, TLS failed, cut short, not HTTP. Says nothing of the status: the store judges it.
  HttpResponse perform(const HttpRequest& request);

 private:
  struct Pool;
  HttpTarget target_;
  std::unique_ptr<Pool> pool_;
};

// "HTTP 403" with the body's first line when it has a short one: what a message quotes of a response.
std::string status_text(const HttpResponse& response);

}  // namespace kiln::detail
