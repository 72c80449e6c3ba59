// The public Conversation: one sequence of a session, driven by the
// step-wise generator. Appends are staged and prefilled by generate().
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>

#include "api/api_internal.h"
#include "generate/json_constraint.h"
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
  // The chat so far (system, user and assistant messages) and the session
  // length where each ends, so a rewind keeps the messages still in the KV.
  std::vector<ChatMessage> messages;
  std::vector<int64_t> message_ends;
  std::vector<ChatMessage> staged_messages;  // this turn's, committed by generate()
  std::vector<ChatPart> staged_media;        // for the next user turn
  Reply reply;
  // One random stream across turns (rebuilt only when the options change),
  // so a seeded chat does not replay the same draws every turn.
  SamplingOptions sampling;
  std::shared_ptr<Sampler> sampler;
  MediaOptions media;  // how appended image / audio files are encoded

  std::shared_ptr<Sampler> sampler_for(const SamplingOptions& o) {
    if (!sampler || !(o == sampling)) sampler = std::make_shared<Sampler>(o), sampling = o;
    return sampler;
  }

  Impl(std::shared_ptr<const Engine> e, const ConversationOptions& o)
      : engine(std::move(e)), session(engine->impl().model, 1, api::session_options(o, 1)), source(session),
        steps(source, engine->impl().model.config(), engine->impl().tokenizer.get()), media(o.media) {}
  const ModelConfig& config() const { return engine->impl().model.config(); }
  const Tokenizer& tokenizer() const { return api::require_tokenizer(*engine, "text"); }
  void stage(PromptBatch&& p) { staged = staged.batch == 0 ? std::move(p) : staged.concat(p); }
  bool empty() const { return !started && staged.batch == 0; }
};

Conversation::Conversation(std::shared_ptr<const Engine> engine, ConversationOptions options)
    : impl_(std::make_unique<Impl>(std::move(engine), options)) {}
Conversation::~Conversation() = default;

void Conversation::append_text(const std::string& text) {
  const MediaLoader loader = api::media_loader(*impl_->engine, impl_->media);
  impl_->stage(prompt_from_text(text, impl_->tokenizer(), impl_->config(), impl_->empty(), &loader));
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
  impl_->stage(std::move(p));
}

namespace {
// Stands for the last reply while the template renders the next turn: what
// the template writes after it is what the next turn adds to the KV (the
// reply's own tokens are there already, as the model chose them).
constexpr const char* kReplyMark = "\x01splitdec-reply\x01";

// Drops position 0 of a one-sequence prompt, a text token (BOS or the pending end of turn).
void drop_first_token(PromptBatch& p) {
  p.tokens.erase(p.tokens.begin());
  p.modality.erase(p.modality.begin());
  p.attention_mask.erase(p.attention_mask.begin());
  if (!p.block_ids.empty()) p.block_ids.erase(p.block_ids.begin());
  --p.seq;
}
}  // namespace

void Conversation::set_system(const std::string& text) {
  Impl& c = *impl_;
  if (!c.messages.empty() || std::any_of(c.staged_messages.begin(), c.staged_messages.end(),
                                         [](const ChatMessage& m) { return m.role != "system"; }))
    throw InputError("set_system: the system turn must come before the first user turn");
  c.staged_messages.clear();  // a second call replaces the first
  if (!text.empty()) c.staged_messages.push_back({"system", {{ChatPart::Kind::Text, text, ""}}});
}

void Conversation::append_image(const std::string& path) { impl_->staged_media.push_back({ChatPart::Kind::Image, "", path}); }
void Conversation::append_audio(const std::string& path) { impl_->staged_media.push_back({ChatPart::Kind::Audio, "", path}); }

void Conversation::append_user_turn(const std::string& text) {
  Impl& c = *impl_;
  for (const ChatMessage& m : c.staged_messages)
    if (m.role == "user") throw InputError("append_user_turn: a user turn is already staged; generate its reply first");
  // Staged media belong to this turn whether it is taken or refused (a bad
  // file must not block every later turn).
  std::vector<ChatPart> media = std::move(c.staged_media);
  c.staged_media.clear();
  const ChatPrompter prompter = api::prompter(*c.engine, "a chat turn", c.media);
  ChatMessage user{"user", std::move(media)};
  for (ChatPart& p : parts_from_shorthand(text))
    if (p.kind != ChatPart::Kind::Text || !p.text.empty() || user.parts.empty()) user.parts.push_back(std::move(p));
  std::vector<ChatMessage> all = c.messages;
  all.insert(all.end(), c.staged_messages.begin(), c.staged_messages.end());
  const bool continues = !all.empty() && all.back().role == "assistant";
  PromptBatch p;
  bool drop_pending = false;  // the pending reply token is an <eos> the template does not write
  if (!continues) {
    // The chat's first turn, rendered whole; BOS only at the very start.
    all.push_back(user);
    p = prompter.expand(prompter.render(all, true), user.parts, c.empty());
    if (!c.empty() && !p.tokens.empty() && p.tokens[0] == c.config().bos_token_id) drop_first_token(p);
  } else {
    all.back().parts = {{ChatPart::Kind::Text, kReplyMark, ""}};
    all.push_back(user);
    const std::string rendered = prompter.render(all, true);
    const size_t at = rendered.find(kReplyMark);
    if (at == std::string::npos || rendered.rfind(kReplyMark) != at)
      throw InputError("the chat template does not write the previous reply back exactly once; cannot continue the chat");
    p = prompter.expand(rendered.substr(at + std::string(kReplyMark).size()), user.parts, false);
    // The reply's last token is pending (fed first). When it is the end of
    // turn the template writes next, the template's copy goes; another stop
    // token (<eos>) is not fed at all: HF's rendering never holds it.
    const int pending = c.steps.pending(c.seq);
    const std::vector<int>& eos = c.config().eos_token_ids;
    if (pending >= 0 && !p.tokens.empty() && p.tokens[0] == pending) drop_first_token(p);
    else if (pending >= 0 && std::find(eos.begin(), eos.end(), pending) != eos.end()) drop_pending = true;
  }
  // Nothing changes until the tokens are staged: a refused turn leaves the
  // conversation as it was (no message, the pending token kept).
  if (p.seq > 0) c.stage(std::move(p));
  if (drop_pending) c.steps.set_pending(c.seq, -1);
  c.staged_messages.push_back(std::move(user));
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
  int id = -1;
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
    ro.stop_tokens = reply_stop_tokens(c.config(), tok);
    ro.on_text = on_text;
    if (const auto grammar = api::json_grammar(o))
      ro.constraint = std::make_shared<JsonConstraint>(grammar, api::vocabulary(*c.engine), ro.stop_tokens);
    // Nothing staged: the prompt is just the pending token (fed first by start()).
    PromptBatch prompt = std::move(c.staged);  // dropped whatever happens (below)
    c.staged = PromptBatch{};
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
    // The turn's messages go, a staged system turn stays (it was set once).
    std::erase_if(c.staged_messages, [](const ChatMessage& m) { return m.role != "system"; });
    c.staged_media.clear();
    try {
      if (c.session.length(c.seq) != length_before) c.session.rewind(c.seq, length_before);
    } catch (const CapacityError&) {
      // A sliding ring already dropped what the old end needs: keep what the
      // turn produced (its last token stays pending) rather than lose the
      // conversation, and report the error that ended the turn.
      c.started = true;
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
  const int64_t r_prompt_tokens = r.prompt_tokens;
  c.steps.release(id);
  // The chat's messages: this turn's, then the reply (a reply continued
  // without a new message grows the last one).
  const int64_t prompt_end = length_before + r_prompt_tokens;
  for (ChatMessage& m : c.staged_messages) c.messages.push_back(std::move(m)), c.message_ends.push_back(prompt_end);
  if (!c.messages.empty()) {
    if (c.staged_messages.empty() && c.messages.back().role == "assistant") {
      c.messages.back().parts[0].text += reply.text;
      c.message_ends.back() = c.session.length(c.seq);
    } else {
      c.messages.push_back({"assistant", {{ChatPart::Kind::Text, reply.text, ""}}});
      c.message_ends.push_back(c.session.length(c.seq));
    }
  }
  c.staged_messages.clear();
  c.reply = std::move(reply);
  c.staged = PromptBatch{};
  c.started = true;
  return c.reply.text;
}

int Conversation::forget_oldest_turns(int64_t max_length) {
  Impl& c = *impl_;
  c.staged = PromptBatch{};
  std::erase_if(c.staged_messages, [](const ChatMessage& m) { return m.role != "system"; });
  c.staged_media.clear();
  // Exchanges: each from a user message to the next one. The system turn stays.
  size_t first = 0;
  while (first < c.messages.size() && c.messages[first].role == "system") ++first;
  std::vector<size_t> starts;
  for (size_t i = first; i < c.messages.size(); ++i)
    if (c.messages[i].role == "user") starts.push_back(i);
  if (starts.empty() || c.messages.back().role != "assistant") return 0;
  // What is left after each drop, from where the messages end in the KV (the
  // kept messages rendered alone take about what they take now) plus the
  // system text (it shares its end with the first user turn there).
  int64_t system = 0;
  for (size_t i = 0; i < first; ++i)
    for (const ChatPart& part : c.messages[i].parts) system += int64_t(c.tokenizer().encode(part.text).size());
  const int64_t length = c.session.length(c.seq);
  size_t dropped = 0;
  while (dropped < starts.size()) {
    ++dropped;
    const int64_t cut = dropped < starts.size() ? c.message_ends[starts[dropped] - 1] : length;
    if (system + length - cut <= max_length) break;
  }
  std::vector<ChatMessage> kept(c.messages.begin(), c.messages.begin() + std::ptrdiff_t(first));
  if (dropped < starts.size()) kept.insert(kept.end(), c.messages.begin() + std::ptrdiff_t(starts[dropped]), c.messages.end());
  if (kept.size() == first) {  // only the system turn is left: staged, as set_system leaves it
    rewind(0);
    c.staged_messages = std::move(kept);
    return int(dropped);
  }
  // The kept chat as a fresh one: its text up to the end of the last reply
  // (the end of turn after it is what the next user turn writes first, as
  // after a reply whose end-of-turn token is pending). Made before anything
  // is dropped, so that a template or media error leaves the chat as it was.
  const ChatPrompter prompter = api::prompter(*c.engine, "the kept chat", c.media);
  std::vector<ChatMessage> marked = kept;
  if (marked.back().role == "assistant") marked.back().parts = {{ChatPart::Kind::Text, marked.back().parts[0].text + kReplyMark, ""}};
  std::string text = prompter.render(marked, false);
  const size_t at = text.find(kReplyMark);
  if (at != std::string::npos) text.resize(at);
  std::vector<ChatPart> media;
  for (const ChatMessage& m : kept)
    for (const ChatPart& part : m.parts)
      if (part.kind != ChatPart::Kind::Text) media.push_back(part);
  const PromptBatch prompt = prompter.expand(text, media, true);
  rewind(0);
  RequestOptions ro;
  ro.max_new_tokens = 0;  // prefill only
  try {
    c.steps.release(c.steps.start({c.seq}, prompt, {ro})[0]);
  } catch (...) {
    // What is kept does not fit either: an empty chat, the system turn staged.
    rewind(0);
    c.staged_messages.assign(kept.begin(), kept.begin() + std::ptrdiff_t(first));
    throw;
  }
  c.started = true;
  // Where each kept message ends is not measured: all at the end, so a later
  // rewind keeps them whole or not at all.
  c.messages = std::move(kept);
  c.message_ends.assign(c.messages.size(), c.session.length(c.seq));
  return int(dropped);
}

const Reply& Conversation::last_reply() const { return impl_->reply; }

int64_t Conversation::length() const { return impl_->session.length(impl_->seq); }

void Conversation::rewind(int64_t length) {
  Impl& c = *impl_;
  c.session.rewind(c.seq, length);
  // Keep the messages still whole in the KV. A cut inside a reply keeps the
  // reply as far as it goes (its text from the kept tokens), so the next turn
  // closes it; a chat cut after or inside a user turn starts over (the next
  // user turn renders as a first turn).
  size_t keep = 0;
  while (keep < c.messages.size() && c.message_ends[keep] <= length) ++keep;
  const std::vector<int>& h = c.steps.history(c.seq);
  if (keep < c.messages.size() && keep > 0 && c.messages[keep].role == "assistant" && c.engine->impl().tokenizer &&
      c.message_ends[keep - 1] <= int64_t(h.size())) {
    const int64_t from = c.message_ends[keep - 1], to = std::max(from, std::min<int64_t>(length, int64_t(h.size())));
    c.messages[keep].parts = {{ChatPart::Kind::Text, c.engine->impl().tokenizer->decode(std::vector<int>(h.begin() + from, h.begin() + to)), ""}};
    c.message_ends[keep] = length;
    ++keep;
  }
  c.messages.resize(keep);
  c.message_ends.resize(keep);
  if (!c.messages.empty() && c.messages.back().role != "assistant") c.messages.clear(), c.message_ends.clear();
  c.steps.set_pending(c.seq, -1);
  c.steps.truncate_history(c.seq, size_t(length));
  c.staged = PromptBatch{};
  c.staged_messages.clear();
  c.staged_media.clear();
  c.started = length > 0;
}

std::vector<TraceStep> Conversation::trace() const { return api::to_trace(impl_->session.trace()); }

std::string Conversation::describe_memory() const { return api::describe_memory(impl_->session); }

}  // namespace splitdec
