// splitdec serve: an OpenAI-compatible HTTP server over one model, with
// continuous batching (src/serve/). SIGTERM / SIGINT stop new requests,
// let the accepted ones finish, then exit 0.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "api/api_internal.h"
#include "cli_common.h"
#include "media/image_file.h"
#include "serve/http_server.h"

namespace splitdec::cli {

namespace {

// Signals can land on any thread (OpenBLAS starts its own before main), so
// the handler only writes the signal number to a pipe that one thread reads.
int signal_pipe[2] = {-1, -1};
extern "C" void on_stop_signal(int sig) {
  const unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe[1], &s, 1);
}

struct ServeFlags {
  std::string model, mmproj, model_name, media_dir, api_key;
  std::string generation_config = "auto";
  std::string host = "127.0.0.1";
  int port = 8080;
  int max_sequences = 16, prefill_budget = 512, max_queue = 64, threads = 0, chunk = 256;
  int64_t max_length = 4096, max_body_mb = 64, max_inflight_mb = 256;
  double header_timeout = 10, body_timeout = 60;
  int max_connections = 1024, max_encodes = 1, max_media = 16, media_cache_mb = 256;
  int64_t max_image_pixels = int64_t(1) << 26;
  int image_tokens = 0;
  bool pan_and_scan = false;
  std::string plan = "split", policy, kv_dtype = "f32", weights;
  std::string prefix_cache = "on";
};

// Every size flag is checked against a range before anything is sized from
// it (--max-queue 100000000 once asked for 2x10^8 handler threads).
void check_range(const char* flag, double value, double lo, double hi) {
  if (value >= lo && value <= hi) return;
  char text[160];
  std::snprintf(text, sizeof text, "%s %.10g is out of range: %.10g to %.10g", flag, value, lo, hi);
  throw InputError(text);
}

int run(const ServeFlags& f) {
  check_range("--threads", f.threads, 0, 1024);
  check_range("--max-length", double(f.max_length), 2, 1 << 24);
  check_range("--max-body-mb", double(f.max_body_mb), 1, 4096);
  check_range("--max-inflight-mb", double(f.max_inflight_mb), 1, 65536);
  check_range("--max-sequences", f.max_sequences, 1, 1024);
  check_range("--max-queue", f.max_queue, 0, 4096);
  check_range("--max-connections", f.max_connections, 1, 65536);
  check_range("--prefill-budget", f.prefill_budget, 1, 1 << 20);
  check_range("--chunk", f.chunk, 1, 1 << 20);
  check_range("--port", f.port, 0, 65535);
  check_range("--max-encodes", f.max_encodes, 1, 1024);
  check_range("--max-media", f.max_media, 0, 4096);
  check_range("--media-cache-mb", f.media_cache_mb, 0, 1 << 20);
  check_range("--max-image-pixels", double(f.max_image_pixels), 1, double(kMaxImagePixels));
  check_range("--header-timeout", f.header_timeout, 0.1, 3600);
  check_range("--body-timeout", f.body_timeout, 0.1, 3600);
  if (f.prefix_cache != "on" && f.prefix_cache != "off")
    throw InputError("--prefix-cache must be on or off, got '" + f.prefix_cache + "'");
  if (!f.media_dir.empty() && !std::filesystem::is_directory(f.media_dir))
    throw InputError("--media-dir " + f.media_dir + " is not a directory");
  set_threads(f.threads);

  ConversationOptions co;
  apply_session_flags(co, f.plan, f.policy, f.kv_dtype);
  if (co.plan == ExecutionPlan::Reference)
    throw InputError("--plan reference recomputes every sequence at each step (generate only); the server keeps KV");
  co.chunk = f.chunk;
  co.max_length = f.max_length;
  serve::SchedulerOptions so;
  so.session = api::session_options(co, f.max_sequences);
  so.max_sequences = f.max_sequences;
  so.prefill_budget = f.prefill_budget;
  so.max_queue = f.max_queue;
  so.prefix_cache = f.prefix_cache == "on";

  serve::ServerOptions o;
  o.host = f.host;
  o.port = f.port;
  o.api_key = f.api_key;
  o.media_dir = f.media_dir;
  o.model_name = f.model_name.empty() ? std::filesystem::path(f.model).lexically_normal().filename().string() : f.model_name;
  if (o.model_name.empty()) o.model_name = "splitdec";
  o.limits.max_body_bytes = size_t(f.max_body_mb) << 20;
  o.limits.max_inflight_body_bytes = size_t(f.max_inflight_mb) << 20;
  o.limits.max_connections = size_t(f.max_connections);
  o.max_concurrent_encodes = f.max_encodes;
  o.max_media = f.max_media;
  if (f.generation_config == "auto") o.generation = read_generation_config(f.model);
  o.media_cache_bytes = size_t(f.media_cache_mb) << 20;
  o.limits.head_timeout = std::chrono::milliseconds(int64_t(f.header_timeout * 1000));
  o.limits.body_timeout = std::chrono::milliseconds(int64_t(f.body_timeout * 1000));
  o.image = {f.image_tokens, f.pan_and_scan, f.max_image_pixels};

  if (::pipe(signal_pipe) != 0) throw Error("cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  const auto engine = load_engine(f.model, f.weights, f.mmproj);
  serve::HttpServer server(engine, o, so);
  const int port = server.bind();
  std::printf("splitdec serve: %s on http://%s:%d (%d sequences of %lld positions, plan %s)\n", o.model_name.c_str(),
              o.host.c_str(), port, f.max_sequences, static_cast<long long>(f.max_length), f.plan.c_str());
  std::fflush(stdout);
  std::thread signals([&] {
    unsigned char sig = 0;
    while (::read(signal_pipe[0], &sig, 1) < 0) {
    }
    std::fprintf(stderr, "splitdec serve: %s: draining in-flight requests\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    server.shutdown();
  });
  server.serve();
  signals.join();
  std::fprintf(stderr, "splitdec serve: stopped\n");
  return 0;
}

}  // namespace

void add_serve(CLI::App& app, std::function<int()>& run_fn) {
  auto* cmd = app.add_subcommand("serve", "an OpenAI-compatible HTTP server (chat/completions, completions) with continuous batching");
  auto f = std::make_shared<ServeFlags>();
  cmd->add_option("-m,--model", f->model, "model directory")->required();
  add_mmproj_option(*cmd, f->mmproj);
  cmd->add_option("--weights", f->weights, "weights as stored (checkpoint, default); q8: 8-bit blocks (Q8_0) quantized at load, about half of bf16's bytes; q4: 4-bit blocks (Q4_0), 8-bit embedding; both with int8 activations in decode, q8-f32act / q4-f32act with f32 ones");
  cmd->add_option("--host", f->host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", f->port, "port (default 8080; 0: any free port, printed at start)");
  cmd->add_option("--max-sequences", f->max_sequences, "KV slots: requests decoded together (default 16)");
  cmd->add_option("-c,--max-length,--ctx-size", f->max_length, "positions per sequence: prompt + reply (default 4096)");
  cmd->add_option("--max-queue", f->max_queue, "requests that may wait for a slot before 429, counted by their choices (n) (default 64)");
  cmd->add_option("--prefill-budget", f->prefill_budget, "prompt positions prefilled per scheduler iteration (default 512)");
  cmd->add_option("--prefix-cache", f->prefix_cache,
                  "on | off (default on): a finished request's KV slot keeps its KV, and a request whose prompt shares its "
                  "prefix (media compared by their rows) prefills only the rest");
  cmd->add_option("--api-key", f->api_key, "require Authorization: Bearer KEY on /v1/*");
  cmd->add_option("--media-dir", f->media_dir, "directory whose embedding files requests may name by path");
  cmd->add_option("--model-name", f->model_name, "the model id /v1/models reports (default: the directory's name)");
  cmd->add_option("--generation-config", f->generation_config,
                  "auto: sampling fields a request leaves out come from the model folder's generation_config.json (as vLLM), "
                  "then OpenAI's defaults; none: OpenAI's defaults only")
      ->check(CLI::IsMember({"auto", "none"}));
  cmd->add_option("--max-body-mb", f->max_body_mb, "largest request body in MiB (default 64; larger: 413)");
  cmd->add_option("--max-inflight-mb", f->max_inflight_mb,
                  "request bodies read or handled at once, in MiB (default 256); more wait, then 503");
  cmd->add_option("--max-connections", f->max_connections, "open connections (default 1024); more are closed at once");
  cmd->add_option("--max-encodes", f->max_encodes,
                  "requests whose media are decoded and encoded at once (default 1); others wait their turn");
  cmd->add_option("--max-image-pixels", f->max_image_pixels,
                  "largest image a request may send, in pixels (default 67108864 = 2^26; more: 400 before decoding)");
  cmd->add_option("--max-media", f->max_media, "media parts one request may hold (default 16; more: 400)");
  cmd->add_option("--media-cache-mb", f->media_cache_mb,
                  "encoded media kept by content, so an image sent again (each turn of a chat) is not encoded again "
                  "(default 256; 0: off)");
  cmd->add_option("--header-timeout", f->header_timeout, "seconds a request's head may take to arrive (default 10; then 408)");
  cmd->add_option("--body-timeout", f->body_timeout, "seconds a request's body may take to arrive (default 60; then 408)");
  cmd->add_option("-t,--threads", f->threads, "worker threads (default: all cores)");
  cmd->add_option("--plan", f->plan, "single | split | split-copy | unified (default split)");
  cmd->add_option("--policy", f->policy, "mask policy (default: the model family's)");
  cmd->add_option("--chunk", f->chunk, "prefill chunk size (default 256)");
  cmd->add_option("--kv-dtype", f->kv_dtype, "KV cache storage: f32 | bf16 | f16 | q8");
  cmd->add_option("--image-tokens", f->image_tokens,
                  "Gemma-4 soft tokens per image when a request does not say (image_tokens): 70, 140, 280, 560, 1120");
  cmd->add_flag("--pan-and-scan", f->pan_and_scan,
                "Gemma-3: pan-and-scan crops for every image unless a request says pan_and_scan: false");
  cmd->callback([f, &run_fn] { run_fn = [f] { return run(*f); }; });
}

}  // namespace splitdec::cli
