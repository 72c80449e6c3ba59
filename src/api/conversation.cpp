// The public API (include/splitdec/splitdec.h) over the engine's pieces.
#include <algorithm>

#include "core/error.h"
#include "generate/generator.h"
#include "generate/prompt_text.h"
#include "io/tokenizer.h"
#include "pipeline/session.h"
#include "splitdec/splitdec.h"

namespace splitdec {

struct Engine::Impl {
  Model model;
  std::unique_ptr<Tokenizer> tokenizer;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::shared_ptr<const Engine> Engine::load(const std::string& dir) {
  auto impl = std::make_unique<Impl>(Impl{Model::load(dir), Tokenizer::open_dir(dir)});
  if (!impl->tokenizer) throw InputError(dir + ": the API needs a tokenizer.model in the model directory");
  return std::shared_ptr<const Engine>(new Engine(std::move(impl)));
}

int Engine::vocab_size() const { return impl_->model.config().vocab_size; }
int Engine::hidden_size() const { return impl_->model.config().hidden_size; }
std::string Engine::model_type() const { return impl_->model.config().model_type; }

struct Conversation::Impl {
  std::shared_ptr<const Engine> engine;
  Session session;
  SessionSource source;
  std::unique_ptr<Generator> generator;  // rebuilt per generate call for its options; pending carried over
  std::vector<int> pending;
  PromptBatch staged;  // appended but not yet prefilled
  bool started = false;
  bool reply_closed = true;

  Impl(std::shared_ptr<const Engine> e, const ConversationOptions& o)
      : engine(std::move(e)), session(engine->impl().model, 1, session_options(o)), source(session) {}

  static SessionOptions session_options(const ConversationOptions& o) {
    SessionOptions s;
    s.plan = parse_plan(o.plan);
    s.capacity = o.max_length;
    s.chunk = o.chunk;
    if (!o.policy.empty()) s.policy = parse_mask_policy(o.policy);
    return s;
  }
  const ModelConfig& config() const { return engine->impl().model.config(); }
  void stage(const PromptBatch& p) { staged = staged.batch == 0 ? p : staged.concat(p); }
  bool empty() const { return !started && staged.batch == 0; }
};

Conversation::Conversation(std::shared_ptr<const Engine> engine, ConversationOptions options)
    : impl_(std::make_unique<Impl>(std::move(engine), options)) {}
Conversation::~Conversation() = default;

void Conversation::append_text(const std::string& text) {
  impl_->stage(prompt_from_text(text, *impl_->engine->impl().tokenizer, impl_->config(), impl_->empty()));
}

void Conversation::append_media(const std::vector<float>& embeddings, int64_t rows, MediaKind kind) {
  const ModelConfig& c = impl_->config();
  if (rows <= 0 || int64_t(embeddings.size()) != rows * c.hidden_size)
    throw InputError("append_media: expected " + std::to_string(rows) + " x hidden_size " + std::to_string(c.hidden_size) +
                     " floats, got " + std::to_string(embeddings.size()));
  const SpecialTokens sp = SpecialTokens::resolve(c, *impl_->engine->impl().tokenizer);
  const bool image = kind == MediaKind::Image;
  PromptBatch p;
  p.batch = 1;
  if (impl_->empty()) p.tokens.push_back(SpecialTokens::require(sp.bos, "BOS")), p.modality.push_back(Modality::Text);
  p.tokens.push_back(SpecialTokens::require(image ? sp.boi : sp.boa, image ? "<start_of_image>" : "<start_of_audio>"));
  p.modality.push_back(Modality::Text);
  const int soft = SpecialTokens::require(image ? sp.image_soft : sp.audio_soft, image ? "image soft" : "audio soft");
  for (int64_t k = 0; k < rows; ++k) p.tokens.push_back(soft), p.modality.push_back(image ? Modality::Image : Modality::Audio);
  p.tokens.push_back(SpecialTokens::require(image ? sp.eoi : sp.eoa, image ? "<end_of_image>" : "<end_of_audio>"));
  p.modality.push_back(Modality::Text);
  p.seq = int(p.tokens.size());
  p.attention_mask.assign(p.tokens.size(), 1);
  p.media = embeddings;
  validate_prompt_batch(p, c);
  impl_->stage(p);
}

void Conversation::append_user_turn(const std::string& text) {
  append_text(chat_user_turn(text, impl_->empty(), impl_->reply_closed));
}

std::string Conversation::generate(const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  Impl& c = *impl_;
  if (c.staged.batch == 0 && c.pending.empty()) throw InputError("generate: nothing to continue from; append text first");
  const ModelConfig& config = c.config();
  const SpecialTokens sp = SpecialTokens::resolve(config, *c.engine->impl().tokenizer);
  GenerationOptions go;
  go.sampling.temperature = o.temperature;
  go.sampling.top_k = o.top_k;
  go.sampling.top_p = o.top_p;
  go.sampling.min_p = o.min_p;
  go.sampling.repetition_penalty = o.repetition_penalty;
  go.sampling.seed = o.seed;
  go.sampling.sample = o.temperature > 0 || o.top_k > 0 || o.top_p < 1 || o.min_p > 0;
  if (go.sampling.sample && o.temperature == 0) go.sampling.temperature = 1.f;
  go.stop_strings = o.stop;
  go.tokenizer = c.engine->impl().tokenizer.get();
  go.stop_tokens = config.eos_token_ids;
  if (sp.end_of_turn >= 0) go.stop_tokens.push_back(sp.end_of_turn);
  if (on_text) go.on_text = [&](int, const std::string& t) { on_text(t); };
  Generator gen(c.source, config, go);
  gen.set_pending(c.pending);
  PromptBatch prompt = c.staged;
  if (prompt.batch == 0) {  // continue generating with no new text
    prompt.batch = 1;
  }
  const int64_t before = c.session.length();
  std::string reply;
  try {
    if (prompt.seq == 0) {
      // Only the pending token: feed it as a one-token turn.
      prompt = PromptBatch::text_column(c.pending);
      gen.set_pending({});
    }
    reply = gen.run_turn({prompt, o.max_new_tokens})[0];
  } catch (...) {
    if (c.session.length() != before) c.session.rewind(before);
    throw;
  }
  c.staged = PromptBatch{};
  c.started = true;
  c.pending = gen.pending();
  c.reply_closed = !c.pending.empty() && c.pending[0] == sp.end_of_turn;
  return reply;
}

int64_t Conversation::length() const { return impl_->session.length(); }

void Conversation::rewind(int64_t length) {
  impl_->session.rewind(length);
  impl_->pending.clear();
  impl_->staged = PromptBatch{};
  impl_->started = length > 0;
  impl_->reply_closed = true;
}

}  // namespace splitdec
