// The public Engine and the option conversions the API's classes share.
#include <cstdio>

#include "api/api_internal.h"

#include <nlohmann/json.hpp>
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/families/family.h"
#include "io/safetensors.h"
#include "kv/kv_rows.h"
#include "prompt/prompt_text.h"

namespace splitdec {

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::shared_ptr<const Engine> Engine::load(const std::string& dir, const std::function<void(size_t, size_t)>& progress) {
  return load(dir, LoadOptions{.weights = WeightStorage::Checkpoint, .progress = progress, .mmproj = {}});
}

std::shared_ptr<const Engine> Engine::load(const std::string& dir, const LoadOptions& options) {
  const WeightLoading loading = weight_loading(options.weights);
  auto impl = std::make_unique<Impl>(
      Impl{Model::load(dir, options.progress, loading, options.mmproj), Tokenizer::open_dir(dir), nullptr, nullptr});
  const ModelConfig& c = impl->model.config();
  impl->chat_template = std::make_unique<ChatTemplate>(
      ChatTemplate::from_model_dir(dir, family_of(c).builtin_chat_template));
  impl->frontend = options.mmproj.empty() ? MediaFrontend::load(dir, c, TensorStore::open_dir(dir))
                                          : MediaFrontend::load_mmproj(dir, options.mmproj, c);
  return std::shared_ptr<const Engine>(new Engine(std::move(impl)));
}

int Engine::vocab_size() const { return impl_->model.config().vocab_size; }
int Engine::hidden_size() const { return impl_->model.config().hidden_size; }
std::string Engine::model_type() const { return impl_->model.config().model_type; }
bool Engine::has_tokenizer() const { return impl_->tokenizer != nullptr; }

TokenInputs Engine::encode_prompt(const std::string& text, bool chat_template, const MediaOptions& media) const {
  if (chat_template) return encode_chat(ChatTurn{.system = "", .images = {}, .audio = {}, .text = text, .media = media});
  return encode_parts(prompt_parts(text), media);
}

TokenInputs Engine::encode_parts(const std::vector<PromptPart>& parts, const MediaOptions& media) const {
  const Tokenizer& tok = api::require_tokenizer(*this, "a text prompt");
  const MediaLoader loader = api::media_loader(*this, media);
  return api::to_token_inputs(prompt_from_parts(parts, tok, impl_->model.config(), true, &loader));
}

std::vector<PromptPart> prompt_parts(const std::string& text) { return parts_of_text(text); }

TokenInputs Engine::encode_chat(const ChatTurn& turn) const {
  return api::to_token_inputs(api::prompter(*this, "a chat prompt", turn.media).encode(api::turn_messages(turn), true));
}

TokenInputs Engine::encode_messages(const std::string& messages_json, const std::string& base_dir,
                                    bool add_generation_prompt, const MediaOptions& media) const {
  const ChatPrompter p = api::prompter(*this, "a chat prompt", media);
  return api::to_token_inputs(p.encode(parse_chat_messages(messages_json, base_dir, "messages"), add_generation_prompt));
}

MediaRows Engine::embed_media(const std::string& path, Modality kind, const MediaOptions& media) const {
  if (kind == Modality::Text) throw InputError("embed_media: the kind must be image, video or audio");
  MediaEmbeddings m = api::media_loader(*this, media).load_file(path, kind);
  return MediaRows{m.rows, impl_->model.config().hidden_size, std::move(m.data)};
}

std::string Engine::describe_media() const { return impl_->frontend->describe(); }

std::string Engine::decode(const std::vector<int>& ids) const { return api::require_tokenizer(*this, "decoding").decode(ids); }

void GenerateOptions::validate() const {
  if (max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
  api::sampling_options(*this);
  api::json_grammar(*this);
  for (const std::string& s : stop)
    if (s.empty()) throw InputError("a stop string must not be empty");
}

void set_threads(int threads) {
  if (threads < 0) throw InputError("threads must be >= 0, got " + std::to_string(threads));
  ThreadPool::set_threads(threads);
}

EngineParts engine_parts(const Engine& e) {
  const Engine::Impl& impl = e.impl();
  return {impl.model, impl.tokenizer.get(), *impl.chat_template, impl.frontend};
}

namespace api {

std::shared_ptr<const JsonGrammar> json_grammar(const GenerateOptions& o) {
  if (o.json_schema.empty()) return nullptr;
  if (o.json_schema == "object") return std::make_shared<const JsonGrammar>(any_json_object_grammar());
  const auto schema = nlohmann::ordered_json::parse(o.json_schema, nullptr, false);
  if (schema.is_discarded()) throw InputError("json_schema: not valid JSON");
  return std::make_shared<const JsonGrammar>(compile_json_schema(schema, "json_schema"));
}

std::shared_ptr<const TokenTrie> vocabulary(const Engine& e) {
  const Engine::Impl& impl = e.impl();
  const Tokenizer& tok = require_tokenizer(e, "structured output (json_schema)");
  Engine::Impl::LazyVocabulary& v = *impl.vocabulary;
  std::call_once(v.once, [&] { v.trie = TokenTrie::build(tok, impl.model.config().vocab_size); });
  return v.trie;
}

ChatPrompter prompter(const Engine& e, const char* what, const MediaOptions& media) {
  return ChatPrompter(e.impl().model.config(), require_tokenizer(e, what), *e.impl().chat_template,
                      media_loader(e, media));
}

MediaLoader media_loader(const Engine& e, const MediaOptions& media) {
  return MediaLoader(e.impl().model.config(), e.impl().frontend, ImageOptions{media.image_tokens, media.pan_and_scan})
      .with_progress(media.progress);
}

std::vector<ChatMessage> turn_messages(const ChatTurn& turn) {
  return chat_turn_messages(turn.system, turn.images, turn.audio, turn.text);
}

const Tokenizer& require_tokenizer(const Engine& e, const char* what) {
  if (!e.impl().tokenizer) throw InputError(std::string(what) + " needs a tokenizer.json or tokenizer.model in the model directory");
  return *e.impl().tokenizer;
}

SessionOptions session_options(const ConversationOptions& o, int sequences) {
  SessionOptions s;
  s.plan = session_plan(o.plan);
  s.capacity = o.max_length;
  s.chunk = o.chunk;
  s.max_sequences = sequences;
  s.policy = o.policy;
  s.kv_dtype = kv_storage_dtype(o.kv_dtype);
  s.progress = o.prefill_progress;
  s.keep_trace = o.keep_trace;
  return s;
}

SamplingOptions sampling_options(const GenerateOptions& o) {
  SamplingOptions s;
  s.temperature = o.temperature;
  s.top_k = o.top_k;
  s.top_p = o.top_p;
  s.min_p = o.min_p;
  s.repetition_penalty = o.repetition_penalty;
  s.seed = o.seed;
  // Any sampling option turns sampling on (temperature 1 unless given).
  s.sample = o.temperature > 0 || o.top_k > 0 || o.top_p < 1 || o.min_p > 0;
  if (s.sample && o.temperature == 0) s.temperature = 1.f;
  s.validate();
  return s;
}

PromptBatch to_prompt_batch(const TokenInputs& in, const ModelConfig& config) {
  PromptBatch p;
  p.batch = in.batch;
  p.seq = in.seq;
  p.tokens = in.tokens;
  p.modality = in.modality;
  p.attention_mask = in.attention_mask.empty() ? std::vector<uint8_t>(in.tokens.size(), 1) : in.attention_mask;
  p.block_ids = in.block_ids;
  p.media = in.media;
  validate_prompt_batch(p, config);
  return p;
}

TokenInputs to_token_inputs(PromptBatch p) {
  TokenInputs t;
  t.batch = p.batch;
  t.seq = p.seq;
  t.tokens = std::move(p.tokens);
  t.modality = std::move(p.modality);
  t.attention_mask = std::move(p.attention_mask);
  t.block_ids = std::move(p.block_ids);
  t.media = std::move(p.media);
  return t;
}

std::vector<TraceStep> to_trace(const std::vector<TraceEntry>& trace) {
  std::vector<TraceStep> out;
  for (const TraceEntry& e : trace)
    out.push_back({e.kind == TraceEntry::Decode, e.begin, e.end, path_name(e.path), e.kv_bytes_allocated, e.kv_bytes_copied});
  return out;
}

std::string describe_memory(const Session& s) {
  const KvMemory m = s.memory();
  auto mib = [](size_t b) { return double(b) / (1 << 20); };
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "plan %s, policy %s, capacity %lld, chunk %d\n"
                "KV cache: %d full layers x %lld positions = %.2f MiB; %d sliding layers x %lld-position rings = %.2f MiB; "
                "%d shared layers own none\n",
                plan_name(s.options().plan), mask_policy_name(s.policy()), static_cast<long long>(s.options().capacity),
                s.options().chunk, m.full_layers, static_cast<long long>(m.full_slots), mib(m.full_bytes), m.sliding_layers,
                static_cast<long long>(m.sliding_slots), mib(m.sliding_bytes), m.shared_layers);
  return buf;
}

}  // namespace api
}  // namespace splitdec
