// Accepts connections and serves them with bounded work. One thread (the
// gate) reads every request's head and body with epoll, under the size
// limits, the deadlines and a budget of body bytes in flight, so a slow or
// hostile client costs a socket and a bounded buffer, never a handler
// thread; only whole requests reach the fixed pool of handler threads.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "serve/http_wire.h"

namespace splitdec::serve {

class HttpListener {
 public:
  // Runs on a handler thread with the whole request.
  using Handler = std::function<HttpResponse(HttpRequest&)>;
  // Runs on the gate thread once a head is read, before any of the body: a
  // response refuses the request there (authentication, unknown routes).
  // Must be quick.
  using HeadCheck = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  // Sees the status of every response sent, the gate's refusals included.
  using Observer = std::function<void(int status)>;
  // The body of a refusal the listener makes itself (408, 413, 431, 503, 500).
  using ErrorForm = std::function<HttpResponse(int status, const std::string& message)>;
  struct Callbacks {
    Handler handle;
    HeadCheck check;      // optional
    Observer observe;     // optional
    ErrorForm error;      // optional: plain text
  };

  HttpListener(HttpLimits limits, size_t handler_threads, Callbacks callbacks);
  ~HttpListener();

  // Binds and listens (no SO_REUSEPORT: a port in use is an error, never shared).
  // Port 0 picks a free one. Returns the port.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns at once if stop() came first.
  void run();
  // From any thread: closes the listener and every connection not being
  // handled, lets the handlers finish their responses, then run() returns.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec::serve
