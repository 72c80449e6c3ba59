#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "io/generation_config.h"

namespace splitdec::cli {

namespace {

// Reads decimal `text` into *as_signed (when `negative_ok`) or *as_unsigned,
// and rewrites it without leading zeros; false when it is no such number.
bool parse_decimal(std::string& text, bool negative_ok, int64_t* as_signed, uint64_t* as_unsigned) {
  const bool negative = !text.empty() && text[0] == '-';
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const char* digits = first + (negative ? 1 : 0);
  if ((negative && !negative_ok) || digits == last ||
      !std::all_of(digits, last, [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  const auto r = negative_ok ? std::from_chars(first, last, *as_signed) : std::from_chars(first, last, *as_unsigned);
  if (r.ec != std::errc() || r.ptr != last) return false;
  text = negative_ok ? std::to_string(*as_signed) : std::to_string(*as_unsigned);
  return true;
}

}  // namespace

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const std::string given = text;
        int64_t x = 0;
        uint64_t unused = 0;
        if (!parse_decimal(text, true, &x, &unused) || x < lo || x > hi)
          return "must be an integer in " + range + " (got " + given + ")";
        return {};
      },
      range);
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string given = text;
        int64_t unused = 0;
        uint64_t x = 0;
        if (!parse_decimal(text, false, &unused, &x)) return "seeds are 0..18446744073709551615 (got " + given + ")";
        return {};
      },
      "0..2^64-1");
}

void SessionFlags::add_to(CLI::App& app) {
  app.add_option("--plan", plan, "single | split | split-copy | unified | reference (default split)");
  app.add_option("--policy", policy, "mask policy (default: the model family's)");
  app.add_option("--chunk", chunk, "prefill chunk size (default 256)")->transform(integer_in(1, 1 << 20));
  // 2^31: the session's limit on KV capacity (pipeline/session.cpp).
  app.add_option("-c,--max-length,--ctx-size", max_length,
                 "KV capacity in positions (default: generate, what the prompt and "
                 "--max-new-tokens need; chat, 4096)")
      ->transform(integer_in(1, int64_t(1) << 31));
  app.add_flag("--trace", trace, "print each chunk and step: positions, path, KV bytes allocated/copied");
  app.add_flag("-v,--verbose", verbose, "report the KV cache size per layer type");
  app.add_option("-t,--threads", threads, "worker threads, 0 for all cores (default)")
      ->transform(integer_in(0, kMaxThreadsFlag));
  app.add_option("--kv-dtype", kv_dtype, "KV cache storage of the shared buffer: f32 | bf16 | f16 | q8 (int8 rows with one f32 scale each)");
  app.add_option("--weights", weights, "weights as stored (checkpoint, default); q8: 8-bit blocks (Q8_0) quantized at load, about half of bf16's bytes; q4: 4-bit blocks (Q4_0), 8-bit embedding; both with int8 activations in decode, q8-f32act / q4-f32act with f32 ones");
}

void progress_line(const std::string& text) {
  std::fprintf(stderr, "\r%s", text.empty() ? "\033[K" : text.c_str());
  std::fflush(stderr);
}

namespace {
// A progress callback for long prefills (empty when stderr is not a terminal).
std::function<void(int64_t, int64_t)> prefill_progress() {
  if (!::isatty(2)) return {};
  return [](int64_t done, int64_t total) {
    progress_line(done < total ? "prefill " + std::to_string(done) + "/" + std::to_string(total) + " tokens" : "");
  };
}
}  // namespace

MediaOptions media_options(int image_tokens, bool pan_and_scan) {
  MediaOptions m{.image_tokens = image_tokens, .pan_and_scan = pan_and_scan};
  if (::isatty(2))
    m.progress = [](const std::string& file, int done, int total) {
      progress_line(done < total ? "encoding " + file + ": layer " + std::to_string(done + 1) + "/" + std::to_string(total) : "");
    };
  return m;
}

MediaOptions PromptFlags::media() const { return media_options(image_tokens, pan_and_scan); }

void apply_session_flags(ConversationOptions& o, const std::string& plan, const std::string& policy,
                         const std::string& kv_dtype) {
  o.plan = flag_value("--plan", plan, parse_execution_plan);
  if (!policy.empty()) o.policy = flag_value("--policy", policy, parse_mask_policy);
  o.kv_dtype = flag_value("--kv-dtype", kv_dtype, parse_kv_storage);
}

ConversationOptions SessionFlags::options(int64_t default_capacity) const {
  ConversationOptions o;
  apply_session_flags(o, plan, policy, kv_dtype);
  o.chunk = chunk;
  o.max_length = max_length > 0 ? max_length : default_capacity;
  o.prefill_progress = prefill_progress();
  return o;
}

void PromptFlags::add_to(CLI::App& app) {
  app.add_option("-p,--prompt", prompt,
                 "text prompt; <image:FILE> / <audio:FILE> insert media (a FILE that does not exist is an error; PNG / JPEG / WAV / FLAC "
                 "through the model's frontends, or embeddings: .npy, .safetensors)");
  app.add_option("--messages", messages,
                 "a chat as JSON: [{\"role\": ..., \"content\": \"text\" | [{\"type\": \"text\"|\"image\"|\"audio\"|\"image_url\"|\"input_audio\", ...}]}] (image_url: a data: URL or a file; input_audio: base64 data, as OpenAI's API)");
  app.add_flag("--chat", chat, "render --prompt as one user turn of the model's chat template");
  app.add_option("--system", system, "the system turn (with --chat)");
  app.add_option("--image", images, "an image (PNG, JPEG) or its embeddings file, before the text (repeatable, in order)");
  app.add_option("--audio", audio, "an audio clip (WAV, FLAC; 16 kHz) or its embeddings file, before the text (repeatable)");
  app.add_option("--image-tokens", image_tokens,
                 "Gemma-4 soft tokens per image: 70, 140, 280, 560, 1120 (default: the model's)")
      ->transform(integer_in(0, INT32_MAX));
  app.add_flag("--pan-and-scan", pan_and_scan,
               "Gemma-3: also encode 2-4 crops of a wide or tall image (HF's do_pan_and_scan; 256 tokens each)");
}

void PromptFlags::check() const {
  if (!messages.empty() && (!prompt.empty() || chat || !system.empty() || !images.empty() || !audio.empty()))
    throw InputError("--messages holds the whole chat: do not combine it with --prompt, --chat, --system, --image or --audio");
  if (!system.empty() && !chat) throw InputError("--system needs --chat");
  for (const auto* list : {&images, &audio})
    for (const std::string& f : *list)
      if (!std::filesystem::is_regular_file(f))
        throw InputError((list == &images ? "--image " : "--audio ") + f + ": no such file");
  // A placeholder whose file is missing would go to the model as text: a
  // typo in a path must not become a prompt about nothing.
  for (const char* tag : {"<image:", "<audio:"}) {
    for (size_t at = prompt.find(tag); at != std::string::npos; at = prompt.find(tag, at + 1)) {
      const size_t close = prompt.find('>', at);
      if (close == std::string::npos) break;
      const std::string path = prompt.substr(at + 7, close - at - 7);
      std::error_code ec;
      if (!path.empty() && !std::filesystem::is_regular_file(path, ec))
        throw InputError("--prompt: " + std::string(tag) + path + ">: no such file (PNG / JPEG / WAV / FLAC, or .npy / "
                         ".safetensors embeddings)");
    }
  }
}

ChatTurn PromptFlags::chat_turn() const {
  return ChatTurn{.system = system, .images = images, .audio = audio, .text = prompt, .media = media()};
}

std::vector<PromptPart> PromptFlags::plain_parts() const {
  std::vector<PromptPart> parts;
  for (const std::string& f : images) parts.push_back({Modality::Image, f});
  for (const std::string& f : audio) parts.push_back({Modality::Audio, f});
  for (PromptPart& p : prompt_parts(prompt)) parts.push_back(std::move(p));
  return parts;
}

std::string PromptFlags::messages_text() const {
  std::ifstream in(messages, std::ios::binary);
  if (!in) throw InputError("--messages " + messages + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void SamplingFlags::add_to(CLI::App& app) {
  temperature_flag_ = app.add_option("--temperature", temperature,
                                     "sampling temperature (default: greedy, or the model's generation_config.json)");
  top_k_flag_ = app.add_option("--top-k", top_k, "keep the k most likely tokens (0: off)")->transform(integer_in(0, INT32_MAX));
  top_p_flag_ = app.add_option("--top-p", top_p, "keep the smallest set whose probability reaches p");
  min_p_flag_ = app.add_option("--min-p", min_p, "drop tokens below min-p times the top probability");
  repetition_flag_ = app.add_option("--repetition-penalty", repetition_penalty, "penalise tokens already seen (HF rule)");
  app.add_option("-s,--seed", seed, "sampling seed (default 0; the same seed gives the same sample)")
      ->transform(seed_value());
  app.add_option("--stop", stop, "stop string (repeatable)");
  app.add_option("--json-schema", json_schema,
                 "structured output: each reply is a JSON document of the schema in this file (\"object\": any JSON "
                 "object), enforced while sampling");
  app.add_option("--generation-config", generation_config,
                 "auto: sampling fields no flag sets come from the model folder's generation_config.json, as transformers "
                 "and vLLM take them; none: greedy unless flags say otherwise")
      ->check(CLI::IsMember({"auto", "none"}));
}

GenerateOptions SamplingFlags::options(int max_new_tokens, const std::string& model, std::string* applied) const {
  GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repetition_penalty = repetition_penalty;
  o.seed = seed;
  o.stop = stop;
  if (json_schema == "object") {
    o.json_schema = "object";
  } else if (!json_schema.empty()) {
    std::ifstream in(json_schema);
    if (!in) throw InputError("--json-schema " + json_schema + ": cannot open");
    o.json_schema.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const GenerationDefaults d = generation_config == "none" ? GenerationDefaults{} : read_generation_config(model);
  const std::string file = d.source.empty() ? "" : std::filesystem::path(d.source).filename().string();
  std::vector<std::string> from_file;
  auto given = [](const CLI::Option* flag) { return flag && flag->count() > 0; };
  // --temperature 0 asks for greedy: the file's sampling fields stay out.
  const bool greedy_asked = given(temperature_flag_) && temperature == 0.f;
  if (d.do_sample && !greedy_asked && d.temperature.value_or(1.f) > 0.f) {
    if (!given(temperature_flag_)) o.temperature = d.temperature.value_or(1.f), from_file.push_back("temperature");
    if (!given(top_k_flag_)) o.top_k = d.top_k.value_or(50), from_file.push_back("top_k");  // transformers' default top_k
    if (!given(top_p_flag_) && d.top_p) o.top_p = *d.top_p, from_file.push_back("top_p");
    if (!given(min_p_flag_) && d.min_p) o.min_p = *d.min_p, from_file.push_back("min_p");
  }
  if (!given(repetition_flag_) && d.repetition_penalty) o.repetition_penalty = *d.repetition_penalty, from_file.push_back("repetition_penalty");
  if (applied) {
    const bool sample = o.temperature > 0 || o.top_k > 0 || o.top_p < 1 || o.min_p > 0;
    char text[256];
    std::snprintf(text, sizeof text, "sampling: %s, temperature %g, top_k %d, top_p %g, min_p %g, repetition_penalty %g, seed %llu",
                  sample ? "sampled" : "greedy", o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty,
                  (unsigned long long)o.seed);
    *applied = text;
    if (!from_file.empty()) {
      *applied += "; from " + d.source + ":";
      for (const std::string& f : from_file) *applied += " " + f;
    } else if (!file.empty()) {
      *applied += "; " + d.source + (greedy_asked ? " left out (--temperature 0)" : " sets no sampling field here");
    }
    *applied += "\n";
  }
  return o;
}

std::shared_ptr<const Engine> load_engine(const std::string& dir, const std::string& weights, const std::string& mmproj) {
  LoadOptions o{.weights = flag_value("--weights", weights, parse_weight_storage), .progress = {}, .mmproj = mmproj};
  if (!::isatty(2)) return Engine::load(dir, o);
  o.progress = [](size_t done, size_t total) {
    std::fprintf(stderr, "\rloading weights %zu/%zu", done + 1, total);
    std::fflush(stderr);
  };
  auto engine = Engine::load(dir, o);
  std::fprintf(stderr, "\r\033[K");
  return engine;
}

void add_mmproj_option(CLI::App& cmd, std::string& mmproj) {
  cmd.add_option("--mmproj", mmproj,
                 "with a GGUF --model: the media towers as llama.cpp's converter writes them (mmproj-*.gguf; Gemma-3 vision, "
                 "Gemma-4 vision and audio)");
}

void print_trace(const std::vector<TraceStep>& trace, size_t from) {
  for (size_t k = from; k < trace.size(); ++k) {
    const TraceStep& e = trace[k];
    std::printf("trace %-7s positions [%lld, %lld) path %-10s kv allocated %lld B, copied %lld B\n", e.decode ? "decode" : "prefill",
                static_cast<long long>(e.begin), static_cast<long long>(e.end), e.path.c_str(),
                static_cast<long long>(e.kv_bytes_allocated), static_cast<long long>(e.kv_bytes_copied));
  }
}

}  // namespace splitdec::cli
