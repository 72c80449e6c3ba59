// The OpenAI-compatible HTTP front: routes, authentication, limits, and
// the hand-off of each generation to the scheduler. Handler threads never
// touch the model; they parse, submit a job and write what it produces.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "io/generation_config.h"
#include "media/media_frontend.h"
#include "serve/http_wire.h"
#include "serve/json_limits.h"
#include "serve/scheduler.h"

namespace splitdec {
class Engine;
}

namespace splitdec::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see bind())
  std::string api_key;    // empty: no authentication
  std::string media_dir;  // empty: media file paths are refused
  std::string model_name; // what /v1/models lists and responses echo
  HttpLimits limits;  // what a client may cost before a handler sees its request (body size, timeouts, head size, ...)
  JsonLimits json;    // request JSON nesting and size, checked before it is parsed
  int max_media = 16;  // media parts in one request (--max-media)
  int max_concurrent_encodes = 1;  // media decoded and encoded at once (--max-encodes); more requests wait
  size_t media_cache_bytes = size_t(256) << 20;  // encoded media kept by content (--media-cache-mb); 0: none
  ImageOptions image;  // requests' defaults (--image-tokens, --pan-and-scan); a request may override them
  // Sampling fields a request leaves out come from here (the model's
  // generation_config.json, as vLLM's server takes it), then OpenAI's defaults.
  GenerationDefaults generation;
};

class HttpServer {
 public:
  HttpServer(std::shared_ptr<const Engine> engine, ServerOptions options, SchedulerOptions scheduler);
  ~HttpServer();

  // Binds the listening socket; returns the port (the chosen one for port 0).
  int bind();
  // Serves until shutdown(); returns once the listener is closed.
  void serve();
  // From any thread: refuses new generations (503), lets the accepted ones
  // finish and their responses go out, then closes the listener.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec::serve
