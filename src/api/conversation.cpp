// The public Conversation: one sequence of a session, driven by the
// step-wise generator. Appends are staged and prefilled by generate().
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>

#include "api/api_internal.h"
#include "core/error.h"
#include "prompt/prompt_text.h"
#include "generate/step_generator.h"

namespace splitdec {

struct Conversation::Impl {
  std::shared_ptr<const Engine> engine;
  Session session;
  SessionSource source;
  StepGenerator steps;
  int seq = 0;
  PromptBatch staged;  // appended but not yet prefilled
  bool started = false;
  bool reply_closed = true;
  Reply reply;
  // One random stream across turns (rebuilt only when the options change),
  // so a seeded chat does not replay the same draws every turn.
  SamplingOptions sampling;
  std::shared_ptr<Sampler> sampler;

  std::shared_ptr<Sampler> sampler_for(const SamplingOptions& o) {
    if (!sampler || !(o == sampling)) sampler = std::make_shared<Sampler>(o), sampling = o;
    return sampler;
  }

  Impl(std::shared_ptr<const Engine> e, const ConversationOptions& o)
      : engine(std::move(e)), session(engine->impl().model, 1, api::session_options(o, 1)), source(session),
        steps(source, engine->impl().model.config(), engine->impl().tokenizer.get()) {}
  const ModelConfig& config() const { return engine->impl().model.config(); }
  const Tokenizer& tokenizer() const { return api::require_tokenizer(*engine, "text"); }
  void stage(const PromptBatch& p) { staged = staged.batch == 0 ? p : staged.concat(p); }
  bool empty() const { return !started && staged.batch == 0; }
};

Conversation::Conversation(std::shared_ptr<const Engine> engine, ConversationOptions options)
    : impl_(std::make_unique<Impl>(std::move(engine), options)) {}
Conversation::~Conversation() = default;

void Conversation::append_text(const std::string& text) {
  impl_->stage(prompt_from_text(text, impl_->tokenizer(), impl_->config(), impl_->empty()));
}

void Conversation::append_media(const std::vector<float>& embeddings, int64_t rows, MediaKind kind) {
  const ModelConfig& c = impl_->config();
  if (rows <= 0 || int64_t(embeddings.size()) != rows * c.hidden_size)
    throw InputError("append_media: expected " + std::to_string(rows) + " x hidden_size " + std::to_string(c.hidden_size) +
                     " floats, got " + std::to_string(embeddings.size()));
  for (float x : embeddings)
    if (!std::isfinite(x)) throw InputError("append_media: the embeddings hold a non-finite value");
  const SpecialTokens sp = SpecialTokens::resolve(c, impl_->tokenizer());
  PromptBatch p = media_prompt(sp, embeddings, rows, kind == MediaKind::Image ? Modality::Image : Modality::Audio);
  if (impl_->empty()) p = PromptBatch::text_column({SpecialTokens::require(sp.bos, "BOS")}).concat(p);
  validate_prompt_batch(p, c);
  impl_->stage(p);
}

void Conversation::append_user_turn(const std::string& text) {
  append_text(chat_user_turn(text, impl_->empty(), impl_->reply_closed));
}

void Conversation::append_tokens(const TokenInputs& inputs) {
  if (inputs.batch != 1) throw InputError("append_tokens: a conversation holds one sequence, got " + std::to_string(inputs.batch));
  impl_->stage(api::to_prompt_batch(inputs, impl_->config()));
}

std::string Conversation::generate(const GenerateOptions& o, const std::function<void(const std::string&)>& on_text) {
  Impl& c = *impl_;
  const int pending = c.steps.pending(c.seq);
  if (c.staged.batch == 0 && pending < 0) throw InputError("generate: nothing to continue from; append text first");
  const int64_t length_before = c.session.length(c.seq);
  const size_t history_before = c.steps.history(c.seq).size();
  std::shared_ptr<Sampler> sampler;
  std::optional<Sampler> sampler_before;  // a failed turn draws nothing from the stream
  using clock = std::chrono::steady_clock;
  Reply reply;
  int id = -1, end_of_turn = -1;
  try {
    sampler = c.sampler_for(api::sampling_options(o));
    sampler_before = *sampler;
    const Tokenizer* tok = c.engine->impl().tokenizer.get();
    RequestOptions ro;
    ro.sampling = c.sampling;
    ro.sampler = sampler;
    ro.stop_strings = o.stop;
    ro.max_new_tokens = o.max_new_tokens;
    ro.keep_step_logits = o.keep_step_logits;
    ro.stop_tokens = c.config().eos_token_ids;
    end_of_turn = tok ? SpecialTokens::resolve(c.config(), *tok).end_of_turn : -1;
    if (end_of_turn >= 0) ro.stop_tokens.push_back(end_of_turn);
    ro.on_text = on_text;
    // Nothing staged: the prompt is just the pending token (fed first by start()).
    PromptBatch prompt = c.staged;
    if (prompt.batch == 0) prompt.batch = 1;
    auto t0 = clock::now();
    id = c.steps.start({c.seq}, prompt, {ro})[0];
    reply.prefill_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    t0 = clock::now();
    while (c.steps.step()) ++reply.decode_steps;
    reply.decode_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (c.steps.request(id).stop_reason == StopReason::NonFinite)
      throw Error("the model produced NaN or Inf logits after " + std::to_string(c.steps.request(id).tokens.size()) +
                  " tokens of the reply; check the weights (the turn was rolled back)");
  } catch (...) {
    // Leave the conversation as it was before the turn: the KV, the pending
    // token, the history, the random stream; the turn's staged input is dropped.
    const std::exception_ptr original = std::current_exception();
    if (id >= 0) c.steps.cancel(id), c.steps.release(id);
    c.staged = PromptBatch{};
    try {
      if (c.session.length(c.seq) != length_before) c.session.rewind(c.seq, length_before);
    } catch (const CapacityError&) {
      // A sliding ring already dropped what the old end needs: keep what the
      // turn produced (its last token stays pending) rather than lose the
      // conversation, and report the error that ended the turn.
      c.started = true;
      c.reply_closed = false;
      std::rethrow_exception(original);
    }
    c.steps.set_pending(c.seq, pending);
    c.steps.truncate_history(c.seq, history_before);
    if (sampler && sampler_before) *sampler = *sampler_before;
    throw;
  }
  const Request& r = c.steps.request(id);
  reply.tokens = r.tokens;
  reply.text = r.text;
  reply.stop_reason = stop_reason_name(r.stop_reason);
  reply.prompt_tokens = r.prompt_tokens;
  c.steps.release(id);
  c.reply = std::move(reply);
  c.staged = PromptBatch{};
  c.started = true;
  c.reply_closed = c.steps.pending(c.seq) == end_of_turn;
  return c.reply.text;
}

const Reply& Conversation::last_reply() const { return impl_->reply; }

int64_t Conversation::length() const { return impl_->session.length(impl_->seq); }

void Conversation::rewind(int64_t length) {
  Impl& c = *impl_;
  c.session.rewind(c.seq, length);
  c.steps.set_pending(c.seq, -1);
  c.steps.truncate_history(c.seq, size_t(length));
  c.staged = PromptBatch{};
  c.started = length > 0;
  c.reply_closed = true;
}

std::vector<TraceStep> Conversation::trace() const { return api::to_trace(impl_->session.trace()); }

std::string Conversation::describe_memory() const { return api::describe_memory(impl_->session); }

}  // namespace splitdec
