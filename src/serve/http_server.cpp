#include "serve/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <semaphore>
#include <string_view>
#include <thread>
#include <nlohmann/json.hpp>

#include "api/engine_parts.h"
#include "media/media_frontend.h"
#include "media/media_loader.h"
#include "model/gemma_model.h"
#include "prompt/chat_template.h"
#include "splitdec/splitdec.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "generate/token_trie.h"
#include "prompt/tool_call_format.h"
#include "serve/chat_input.h"
#include "tokenizer/tokenizer.h"
#include "serve/api_error.h"
#include "serve/completion_request.h"
#include "serve/http_listener.h"
#include "serve/json_limits.h"
#include "serve/response_json.h"
#include "serve/token_endpoints.h"

namespace splitdec::serve {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

HttpResponse json_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse error_response(const ApiError& e) {
  return json_response(e.status, e.body().dump(-1, ' ', false, json::error_handler_t::replace));
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
    case 408: case 411: case 413: case 431: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 503: return "server_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

// Whether a body names a media part type (it may say so in other places
// too: then it only waits for its media turn without need).
bool may_hold_media(const std::string& body) {
  for (const char* type : {"\"image_url\"", "\"input_audio\"", "\"image\"", "\"audio\""})
    if (body.find(type) != std::string::npos) return true;
  return false;
}

struct Route {
  const char* method;
  const char* path;
  bool prefix = false;  // the path and anything after it (/v1/models/{id})
};
constexpr const char* kModelPath = "/v1/models/";
constexpr Route kRoutes[] = {{"GET", "/health"},
                             {"GET", "/ready"},
                             {"GET", "/metrics"},
                             {"GET", "/v1/models"},
                             {"GET", kModelPath, true},
                             {"POST", "/v1/chat/completions"},
                             {"POST", "/v1/completions"},
                             {"POST", "/tokenize"},
                             {"POST", "/detokenize"}};

bool route_matches(const Route& r, const HttpRequest& req) {
  if (req.method != r.method) return false;
  return r.prefix ? req.path.rfind(r.path, 0) == 0 && req.path.size() > std::string_view(r.path).size() : req.path == r.path;
}

// The probes (/health, /ready) and /metrics are open; everything that runs
// the model or its tokenizer needs the key when there is one.
bool needs_api_key(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize";
}

// A model id in a path may be percent-encoded ("google%2Fgemma-3"); a bad escape stays as written.
std::string percent_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

namespace {
// A chat whose reply may hold tool calls.
bool uses_tools(const CompletionRequest& r) { return r.chat && !r.tools.tools.is_null() && r.tools.choice != "none"; }
}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<const Engine> engine;
  const EngineParts parts;  // the engine's, which it outlives
  ServerOptions options;
  Metrics metrics;
  Scheduler scheduler;
  std::unique_ptr<HttpListener> http;
  std::atomic<bool> draining{false};
  // Responses whose body is still being written (streams outlive their handler).
  std::mutex open_m;
  std::condition_variable open_cv;
  int64_t open_responses = 0;

  Impl(std::shared_ptr<const Engine> e, ServerOptions o, SchedulerOptions s)
      : engine(std::move(e)), parts(engine_parts(*engine)), options(std::move(o)), metrics(s.max_sequences),
        scheduler(parts.model, parts.tokenizer, s, metrics),
        encode_slots(std::clamp<std::ptrdiff_t>(options.max_concurrent_encodes, 1, 1024)) {
    if (!parts.tokenizer) throw InputError("serve needs the model's tokenizer (tokenizer.json or tokenizer.model)");
    // Every generation holds a handler thread while it runs or waits for a
    // slot; a few more answer health checks, metrics and refusals meanwhile.
    // Slow clients never hold one: the listener's gate reads whole requests first.
    const size_t threads = size_t(s.max_sequences + s.max_queue) + 8;
    HttpListener::Callbacks cb;
    cb.handle = [this](HttpRequest& req) { return route(req); };
    cb.check = [this](const HttpRequest& req) { return check_head(req); };
    cb.observe = [this](int status) { metrics.count_request(status); };
    cb.error = [](int status, const std::string& message) {
      return error_response(ApiError(status, message, "", "", status_type(status)));
    };
    http = std::make_unique<HttpListener>(options.limits, threads, std::move(cb));
    // No tokenization puts more text bytes in one token than its piece
    // holds (twice that, for normalizers that shrink text): more text than
    // this cannot fit the context, whatever it tokenizes to.
    const Tokenizer& tok = *parts.tokenizer;
    size_t longest = 1;
    for (int i = 0; i < tok.piece_count(); ++i) longest = std::max(longest, tok.piece(i).size());
    max_text_bytes = size_t(s.session.capacity) * longest * 2 + 4096;
  }
  size_t max_text_bytes = 0;

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

  // On the listener's gate, before any body byte is read: the key, the route.
  std::optional<HttpResponse> check_head(const HttpRequest& req) const {
    if (!options.api_key.empty() && needs_api_key(req.path)) {
      const std::string* auth = req.header("authorization");
      if (!auth || auth->rfind("Bearer ", 0) != 0 || !same_secret(auth->substr(7), options.api_key))
        return error_response(ApiError(401, "a valid API key is required: Authorization: Bearer <key>", "",
                                       "invalid_api_key", "authentication_error"));
    }
    for (const Route& r : kRoutes)
      if (route_matches(r, req)) return std::nullopt;
    return error_response(ApiError(404, "no route for " + req.method + " " + req.path, "", "", "not_found_error"));
  }

  json model_object() const {
    return {{"id", options.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "splitdec"}};
  }

  HttpResponse route(HttpRequest& req) {
    // Liveness: the process is up and answering, draining or not.
    if (req.path == "/health") return json_response(200, draining ? R"({"status":"draining"})" : R"({"status":"ok"})");
    // Readiness: the port opens only once the model is loaded, so this is
    // 200 from the first answer until SIGTERM starts the drain.
    if (req.path == "/ready")
      return json_response(draining ? 503 : 200, draining ? R"({"status":"draining"})" : R"({"status":"ready"})");
    if (req.path == "/metrics") {
      HttpResponse r = json_response(200, metrics.render() + media_cache_metrics());
      r.content_type = "text/plain; version=0.0.4";
      return r;
    }
    if (req.path == "/v1/models") {
      const json body = {{"object", "list"}, {"data", json::array({model_object()})}};
      return json_response(200, body.dump());
    }
    if (req.path.rfind(kModelPath, 0) == 0) {
      const std::string id = percent_decoded(req.path.substr(std::string_view(kModelPath).size()));
      if (id != options.model_name)
        return error_response(ApiError(404, "The model '" + id + "' does not exist (this server serves '" +
                                                options.model_name + "')",
                                       "model", "model_not_found", "invalid_request_error"));
      return json_response(200, model_object().dump(-1, ' ', false, json::error_handler_t::replace));
    }
    if (req.path == "/tokenize" || req.path == "/detokenize") return token_endpoint(req);
    return completion(req, req.path == "/v1/chat/completions");
  }

  HttpResponse token_endpoint(const HttpRequest& req) const {
    try {
      check_json_limits(req.body, options.json);
      const EngineParts& e = parts;
      const TokenEndpointContext ctx{*e.tokenizer, e.model.config(), max_text_bytes};
      return json_response(200, req.path == "/tokenize" ? tokenize_reply(req.body, ctx) : detokenize_reply(req.body, ctx));
    } catch (const ApiError& e) {
      return error_response(e);
    } catch (const json::exception& e) {
      return error_response(ApiError(400, std::string("malformed request: ") + e.what()));
    }
  }

  // Media encodes run on the cores the decode steps use: at most
  // `max_concurrent_encodes` at once; a request waits for its turn (and
  // gives it up if its client leaves meanwhile).
  std::counting_semaphore<1024> encode_slots;
  // Requests' images and audio by content (null with --media-cache-mb 0).
  const std::shared_ptr<EncodedMediaCache> media_cache =
      options.media_cache_bytes > 0 ? std::make_shared<EncodedMediaCache>(options.media_cache_bytes) : nullptr;
  std::string media_cache_metrics() const {
    const EncodedMediaCache::Stats s = media_cache ? media_cache->stats() : EncodedMediaCache::Stats{};
    std::string out;
    auto line = [&](const char* name, const char* type, const char* help, int64_t v) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    line("splitdec_media_cache_hits_total", "counter", "Images and audio taken from the encoded-media cache, not encoded.", s.hits);
    line("splitdec_media_cache_misses_total", "counter", "Images and audio encoded (not in the cache).", s.misses);
    line("splitdec_media_cache_evictions_total", "counter", "Encoded media dropped for the cache's byte budget.", s.evictions);
    line("splitdec_media_cache_bytes", "gauge", "Bytes the encoded-media cache holds (--media-cache-mb).", s.bytes);
    return out;
  }
  struct EncodeSlot {
    Impl& s;
    std::chrono::steady_clock::time_point start;
    EncodeSlot(Impl& server, const HttpRequest& req) : s(server) {
      s.metrics.media_waiting(1);
      struct Waited {
        Metrics& m;
        ~Waited() { m.media_waiting(-1); }
      } waited{s.metrics};
      while (!s.encode_slots.try_acquire_for(250ms)) {
        if (req.client_gone()) throw ApiError(499, "the client left while its media waited to be encoded");
        if (s.draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_unavailable");
      }
      start = std::chrono::steady_clock::now();
    }
    ~EncodeSlot() {
      s.metrics.observe_media_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      s.encode_slots.release();
    }
  };

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
    GenerationParams p;
    p.prompt = r.prompt;
    p.sampling = r.sampling;
    p.stop = r.stop;
    p.max_tokens = max_tokens;
    p.top_logprobs = r.top_logprobs;
    if (r.choices > scheduler.max_sequences())
      throw ApiError(400, "n: " + std::to_string(r.choices) + " choices need as many sequence slots; this server has " +
                              std::to_string(scheduler.max_sequences()) + " (--max-sequences)",
                     "n");
    p.choices = r.choices;
    return p;
  }

  HttpResponse completion(HttpRequest& req, bool chat) {
    const auto received = std::chrono::steady_clock::now();
    try {
      if (draining) throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_unavailable");
      check_json_limits(req.body, options.json);
      const EngineParts& e = parts;
      auto parse = [&](const MediaLoader& media) {
        return parse_completion_request(req.body, chat, {*e.tokenizer, e.model.config(), e.chat_template, options.media_dir,
                                                         media, max_text_bytes, size_t(options.max_media), options.generation});
      };
      // First with media counted, not encoded (decoded and sized only): a
      // prompt too long for the context is refused before any tower runs.
      // Decoding media is the memory-hungry part (pixels before they are
      // sized): a body that may hold media parts takes its media turn first.
      std::optional<EncodeSlot> slot;
      // Decoding and encoding media yields the cores to the decode steps,
      // and stops between two of the tower's jobs if the client leaves.
      std::optional<ThreadPool::Background> behind_decode_steps(std::in_place, [&req] { return req.client_gone(); });
      if (may_hold_media(req.body)) slot.emplace(*this, req);
      CompletionRequest r = parse(MediaLoader::counting(e.model.config(), e.frontend, options.image));
      GenerationParams params = admission(r);
      const auto& kinds = r.prompt.modality;
      if (std::any_of(kinds.begin(), kinds.end(), [](Modality m) { return m != Modality::Text; })) {
        r = parse(MediaLoader(e.model.config(), e.frontend, options.image).with_cache(media_cache));
        params = admission(r);
      }
      if (r.json_grammar) {
        params.json_grammar = r.json_grammar;
        params.vocabulary = api::vocabulary(*engine);  // the engine builds it once, on first use
      }
      // A tool's answer is the client's to give: the reply ends where the model would write one.
      if (uses_tools(r)) params.stop.push_back(kToolResponseOpen);
      slot.reset();
      behind_decode_steps.reset();
      std::string().swap(req.body);  // parsed: the body's bytes are not needed while the reply runs
      auto job = std::make_shared<GenerationJob>(std::move(params), received);
      switch (scheduler.submit(job)) {
        case Scheduler::Admission::Accepted: break;
        case Scheduler::Admission::QueueFull: {
          HttpResponse busy = error_response(ApiError(
              429, "the server is at capacity (every sequence slot and queue place is taken); retry later", "", "queue_full",
              "rate_limit_error"));
          busy.headers.emplace_back("Retry-After", "1");
          return busy;
        }
        case Scheduler::Admission::Closed:
          throw ApiError(503, "the server is shutting down", "", "shutting_down", "server_unavailable");
      }
      ResponseWriter writer(chat, options.model_name, std::move(r.echo), r.top_logprobs >= 0 ? e.tokenizer : nullptr, r.choices);
      if (uses_tools(r)) writer.expect_tool_calls(tool_reply_prefix(r.tools));
      if (r.stream) return stream(job, std::move(writer), r.include_usage);
      return whole(req, *job, writer);
    } catch (const ThreadPool::Cancelled&) {
      return json_response(499, "");  // the client left while its media were encoded: nobody reads a reply
    } catch (const ApiError& e) {
      return error_response(e);
    } catch (const json::exception& e) {  // a field of an unexpected type deep inside
      return error_response(ApiError(400, std::string("malformed request: ") + e.what()));
    }
  }

  HttpResponse whole(const HttpRequest& req, GenerationJob& job, const ResponseWriter& writer) {
    while (!job.take(250ms).done) {
      if (req.client_gone()) {
        // Nobody will read the reply: free the slot and KV at the next step.
        job.cancel();
        return json_response(499, "");
      }
    }
    const std::vector<GenerationOutcome> outcomes = job.outcomes();
    for (const GenerationOutcome& o : outcomes)
      if (!o.error.empty()) throw ApiError(o.error_status, o.error, "", "", status_type(o.error_status));
    return json_response(200, writer.completion(outcomes));
  }

  HttpResponse stream(std::shared_ptr<GenerationJob> job, ResponseWriter writer, bool include_usage) {
    // Counted open until the response (and this guard with it) is destroyed,
    // whether or not its body was ever written.
    open_response();
    auto guard = std::shared_ptr<void>(nullptr, [this, job](void*) {
      job->cancel();  // no-op when it finished
      close_response();
    });
    HttpResponse res;
    res.content_type = "text/event-stream";
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.stream = [job, writer = std::move(writer), include_usage, guard](ResponseStream& out) {
      if (!out.write(writer.first_event())) return;  // the client left: the guard cancels
      int quiet_polls = 0;
      std::vector<bool> finished(size_t(job->choices()), false);  // finish_reason sent
      for (;;) {
        const GenerationJob::Update u = job->take(250ms);
        for (size_t c = 0; c < u.choices.size(); ++c) {
          const GenerationJob::Delta& d = u.choices[c];
          if (d.text.empty() && d.logprobs.empty()) continue;
          const std::string event = writer.text_event(d.text, d.logprobs, int(c));
          if (!event.empty() && !out.write(event)) return;
        }
        // Each choice's finish_reason as it ends (after its last text, above).
        for (const auto& [c, o] : u.ended) {
          if (!out.write(writer.finish_event(o.finish_reason, c))) return;
          finished[size_t(c)] = true;
        }
        if (!u.empty() || !u.ended.empty()) {
          quiet_polls = 0;
        } else if (!u.done && ++quiet_polls >= 8) {
          // An SSE comment while waiting (queued, or a long prefill): a
          // client that left is found out by the failed write.
          quiet_polls = 0;
          if (!out.write(": waiting\n\n")) return;
        }
        if (u.done) break;
      }
      const std::vector<GenerationOutcome> outcomes = job->outcomes();
      const auto failed = std::find_if(outcomes.begin(), outcomes.end(), [](const GenerationOutcome& o) { return !o.error.empty(); });
      if (failed != outcomes.end()) {
        if (!out.write(ResponseWriter::error_event(failed->error, status_type(failed->error_status)))) return;
      } else {
        for (size_t c = 0; c < outcomes.size(); ++c)
          if (!finished[c] && !out.write(writer.finish_event(outcomes[c].finish_reason, int(c)))) return;
        if (include_usage && !out.write(writer.usage_event(outcomes))) return;
      }
      out.write(ResponseWriter::done_event());
    };
    return res;
  }
};

HttpServer::HttpServer(std::shared_ptr<const Engine> engine, ServerOptions options, SchedulerOptions scheduler)
    : impl_(std::make_unique<Impl>(std::move(engine), std::move(options), std::move(scheduler))) {
  // Bad defaults stop the server at startup, not every request that has an image.
  const ImageOptions& image = impl_->options.image;
  if (image.image_tokens != 0 || image.pan_and_scan) {
    const auto& frontend = impl_->parts.frontend;
    if (!frontend) throw InputError("--image-tokens / --pan-and-scan: this model has no vision frontend");
    frontend->check_image_options(image);
  }
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() { return impl_->http->bind(impl_->options.host, impl_->options.port); }

void HttpServer::serve() { impl_->http->run(); }

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
  s.http->stop();
}

}  // namespace splitdec::serve
