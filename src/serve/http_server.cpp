#include "serve/http_server.h"

#include <httplib.h>

#include <atomic>
#include <thread>
#include <nlohmann/json.hpp>

#include "api/api_internal.h"
#include "core/error.h"
#include "serve/api_error.h"
#include "serve/completion_request.h"
#include "serve/response_json.h"

namespace splitdec::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void reply_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  reply_json(res, e.status, e.body().dump(-1, ' ', false, json::error_handler_t::replace));
}

// Compares without an early exit, so the key cannot be guessed byte by byte from timing.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "server_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<const Engine> engine;
  ServerOptions options;
  Metrics metrics;
  Scheduler scheduler;
  httplib::Server http;
  std::atomic<bool> draining{false};
  // Responses whose body is still being written (streams outlive their handler).
  std::mutex open_m;
  std::condition_variable open_cv;
  int64_t open_responses = 0;

  Impl(std::shared_ptr<const Engine> e, ServerOptions o, SchedulerOptions s)
      : engine(std::move(e)), options(std::move(o)), metrics(s.max_sequences),
        scheduler(engine->impl().model, engine->impl().tokenizer.get(), s, metrics) {
    if (!engine->impl().tokenizer) throw InputError("serve needs the model's tokenizer (tokenizer.json or tokenizer.model)");
    // A thread per connection being served: every slot and queue place, plus
    // room for health checks and refusals while all of them are busy.
    const size_t threads = size_t(2 * (s.max_sequences + s.max_queue) + 8);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(options.max_body_bytes);
    http.set_keep_alive_timeout(2);
    routes();
  }

  void open_response() {
    std::lock_guard<std::mutex> lock(open_m);
    ++open_responses;
  }
  void close_response() {
    {
      std::lock_guard<std::mutex> lock(open_m);
      --open_responses;
    }
    open_cv.notify_all();
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0 && same_secret(auth.substr(7), options.api_key))
        return httplib::Server::HandlerResponse::Unhandled;
      reply_error(res, ApiError(401, "a valid API key is required: Authorization: Bearer <key>", "", "invalid_api_key",
                                "authentication_error"));
      return httplib::Server::HandlerResponse::Handled;
    });
    // httplib's own refusals (404, 413, ...) get the OpenAI error form too.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      std::string message = "HTTP " + std::to_string(res.status);
      if (res.status == 404) message = "no route for " + req.method + " " + req.path;
      if (res.status == 413) message = "the request body exceeds the server's limit";
      res.set_content(ApiError::error_body(message, status_type(res.status), "", "").dump(), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string message = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        message += std::string(": ") + e.what();
      } catch (...) {
      }
      reply_error(res, ApiError(500, message, "", "", "server_error"));
    });
    http.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics.count_request(res.status); });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (draining) reply_json(res, 503, R"({"status":"draining"})");
      else reply_json(res, 200, R"({"status":"ok"})");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json body = {{"object", "list"},
                         {"data", json::array({{{"id", options.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "splitdec"}}})}};
      reply_json(res, 200, body.dump());
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, true); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, false); });
  }

  GenerationParams admission(const CompletionRequest& r) const {
    const int64_t capacity = scheduler.capacity(), prompt = r.prompt.seq;
    if (prompt >= capacity)
      throw ApiError(400, "the prompt holds " + std::to_string(prompt) + " tokens; the context length (--max-length) is " +
                              std::to_string(capacity) + " and leaves no room for a reply",
                     r.chat ? "messages" : "prompt", "context_length_exceeded");
    const int64_t max_tokens = r.max_tokens.value_or(capacity - prompt);
    if (prompt + max_tokens > capacity)
      throw ApiError(400, "the prompt (" + std::to_string(prompt) + " tokens) plus max_tokens (" + std::to_string(max_tokens) +
                              ") exceeds the context length " + std::to_string(capacity) + " (--max-length); ask for at most " +
                              std::to_string(capacity - prompt) + " tokens",
                     "max_tokens", "context_length_exceeded");
    return {r.prompt, r.sampling, r.stop, max_tokens};
  }

  void completion(const httplib::Request& req, httplib::Response& res, bool chat) {
    try {
      if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_unavailable");
      const Engine::Impl& e = engine->impl();
      const MediaLoader media(e.model.config(), e.frontend, options.image);
      const CompletionRequest r =
          parse_completion_request(req.body, chat, {*e.tokenizer, e.model.config(), *e.chat_template, options.media_dir, media});
      auto job = std::make_shared<GenerationJob>(admission(r));
      switch (scheduler.submit(job)) {
        case Scheduler::Admission::Accepted: break;
        case Scheduler::Admission::QueueFull:
          res.set_header("Retry-After", "1");
          throw ApiError(429, "the server is at capacity (every sequence slot and queue place is taken); retry later", "",
                         "queue_full", "rate_limit_error");
        case Scheduler::Admission::Closed:
          throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_unavailable");
      }
      ResponseWriter writer(chat, options.model_name);
      if (r.stream) stream(res, job, std::move(writer), r.include_usage);
      else whole(res, *job, writer);
    } catch (const ApiError& e) {
      reply_error(res, e);
    } catch (const json::exception& e) {  // a field of an unexpected type deep inside
      reply_error(res, ApiError(400, std::string("malformed request: ") + e.what()));
    }
  }

  void whole(httplib::Response& res, GenerationJob& job, const ResponseWriter& writer) {
    while (!job.take(1s).done) {
    }
    const GenerationOutcome o = job.outcome();
    if (!o.error.empty()) throw ApiError(o.error_status, o.error, "", "", status_type(o.error_status));
    reply_json(res, 200, writer.completion(o));
  }

  void stream(httplib::Response& res, std::shared_ptr<GenerationJob> job, ResponseWriter writer, bool include_usage) {
    struct State {
      std::shared_ptr<GenerationJob> job;
      ResponseWriter writer;
      bool include_usage;
      bool started = false;
      int quiet_polls = 0;
    };
    auto st = std::make_shared<State>(State{std::move(job), std::move(writer), include_usage});
    open_response();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
          if (!st->started) {
            st->started = true;
            return send(st->writer.first_event());
          }
          const GenerationJob::Update u = st->job->take(250ms);
          if (!u.text.empty()) {
            st->quiet_polls = 0;
            if (!send(st->writer.text_event(u.text))) return false;  // the client left: the releaser cancels
          } else if (!u.done && ++st->quiet_polls >= 8) {
            // An SSE comment while waiting (queued, or a long prefill): a
            // client that left is found out by the failed write.
            st->quiet_polls = 0;
            if (!send(": waiting\n\n")) return false;
          }
          if (!u.done) return true;
          const GenerationOutcome o = st->job->outcome();
          bool ok = true;
          if (!o.error.empty()) ok = send(ResponseWriter::error_event(o.error, status_type(o.error_status)));
          else {
            ok = send(st->writer.finish_event(o.finish_reason));
            if (ok && st->include_usage) ok = send(st->writer.usage_event(o));
          }
          if (ok) ok = send(ResponseWriter::done_event());
          if (ok) sink.done();
          return ok;
        },
        [this, st](bool) {
          st->job->cancel();  // no-op when it finished
          close_response();
        });
  }
};

HttpServer::HttpServer(std::shared_ptr<const Engine> engine, ServerOptions options, SchedulerOptions scheduler)
    : impl_(std::make_unique<Impl>(std::move(engine), std::move(options), std::move(scheduler))) {
  // Bad defaults stop the server at startup, not every request that has an image.
  const ImageOptions& image = impl_->options.image;
  if (image.image_tokens != 0 || image.pan_and_scan) {
    const auto& frontend = impl_->engine->impl().frontend;
    if (!frontend) throw InputError("--image-tokens / --pan-and-scan: this model has no vision frontend");
    frontend->check_image_options(image);
  }
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  Impl& s = *impl_;
  const int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host) : s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  if (port < 0) throw InputError("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) + " (in use, or not a local address)");
  return port;
}

void HttpServer::serve() { impl_->http.listen_after_bind(); }

void HttpServer::shutdown() {
  Impl& s = *impl_;
  s.draining = true;
  s.scheduler.close();
  s.scheduler.wait_idle();
  {
    // Finished streams still write their last events; a client that stopped
    // reading is cut by the socket's write timeout.
    std::unique_lock<std::mutex> lock(s.open_m);
    s.open_cv.wait_for(lock, 30s, [&] { return s.open_responses == 0; });
  }
  // stop() only acts on a running listener: give serve() a moment to start
  // when shutdown comes right after bind().
  for (int i = 0; i < 200 && !s.http.is_running(); ++i) std::this_thread::sleep_for(5ms);
  s.http.stop();
}

}  // namespace splitdec::serve
