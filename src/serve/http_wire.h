// The HTTP/1.1 messages the server speaks, as plain values, and the reading
// of a request head under the server's limits. No sockets here: the listener
// (http_listener.h) moves bytes, this decides what they mean, so every limit
// can be tested on strings.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace splitdec::serve {

// What one client may cost before its request reaches a handler thread.
// Each refusal names the limit (and its flag) in its message.
struct HttpLimits {
  size_t max_head_bytes = 32 << 10;            // request line + headers (431 past it)
  size_t max_header_count = 100;               // header lines (431 past it)
  size_t max_body_bytes = size_t(64) << 20;    // Content-Length (413 past it; --max-body-mb)
  size_t max_inflight_body_bytes = size_t(256) << 20;  // bodies being read or handled at once; others wait
  std::chrono::milliseconds head_timeout{10000};  // the whole head must arrive in this time (--header-timeout)
  std::chrono::milliseconds body_timeout{60000};  // the whole body, or the wait for body budget (--body-timeout)
  std::chrono::milliseconds idle_timeout{5000};   // a kept-alive connection may idle this long between requests
  std::chrono::milliseconds write_timeout{10000}; // one send may block this long (a client that stopped reading)
  size_t max_connections = 1024;               // open connections; past it new ones are closed at once
};

struct HttpRequest {
  std::string method, path, query;  // path without the query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string peer;  // "address:port"
  bool keep_alive = true;
  // True once the client closed its side: lets a handler that waits long
  // (a whole, non-streamed reply) give its work up. Never null for a request
  // the listener hands out.
  std::function<bool()> client_gone;

  // The value of header `lower_name`, or null.
  const std::string* header(std::string_view lower_name) const;
};

// What a streamed (chunked) body is written to.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // False once the client is gone; later writes do nothing.
  virtual bool write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for a chunked body: called once, on the handler's thread, after the
  // head went out; it writes until its reply is complete or a write fails.
  std::function<void(ResponseStream&)> stream;
};

// Reading what a connection sent so far.
struct RequestHead {
  enum class State { NeedMore, Ready, Refused };
  State state = State::NeedMore;
  HttpRequest request;       // Ready: method, path, query, headers, keep_alive
  size_t head_bytes = 0;     // Ready: the head's length, blank line included
  size_t body_bytes = 0;     // Ready: Content-Length
  bool expect_continue = false;
  int status = 0;            // Refused: 400, 411, 413, 431, 501, 505
  std::string reason;        // Refused: what was wrong, naming the limit
};
RequestHead read_request_head(std::string_view received, const HttpLimits& limits);

const char* reason_phrase(int status);
// The status line and headers of `response`; `body_length` < 0: chunked.
std::string response_head(const HttpResponse& response, long long body_length, bool keep_alive);
// One chunk of a chunked body ("" for the last one).
std::string chunk(std::string_view data);

}  // namespace splitdec::serve
