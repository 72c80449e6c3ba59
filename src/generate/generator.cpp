#include "generate/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "generate/json_constraint.h"
#include "pipeline/session.h"

namespace splitdec {

std::vector<float> SessionSource::prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all) {
  return s_.append(seqs, p, all);
}
void SessionSource::check_prompt(const std::vector<int>& seqs, const PromptBatch& p) const { s_.check_append(seqs, p); }
int64_t SessionSource::room(int seq) const { return s_.options().capacity - s_.length(seq); }
std::vector<float> SessionSource::step(const std::vector<int>& seqs, const std::vector<int>& t) { return s_.decode(seqs, t); }

namespace {
double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(LogitsSource& source, const ModelConfig& config, GenerationOptions options)
    : c_(config), o_(std::move(options)), sampler_(std::make_shared<Sampler>(o_.sampling)), steps_(source, config, o_.tokenizer) {
  if (o_.stop_tokens.empty()) o_.stop_tokens = c_.eos_token_ids;
  StopStrings check(o_.stop_strings);  // throws on an empty string
  if (!o_.stop_strings.empty() && !o_.tokenizer) throw InputError("stop strings need the model's tokenizer");
}

std::vector<std::string> Generator::run_turn(const Turn& turn) {
  const int B = turn.prompt.batch;
  if (turn.max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0");
  if (!first_turn_ && B != int(r_.tokens.size()))
    throw InputError("turn has " + std::to_string(B) + " sequences, the conversation " + std::to_string(r_.tokens.size()));
  std::vector<int> seqs(static_cast<size_t>(B));
  std::vector<RequestOptions> options(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) {
    seqs[size_t(b)] = b;
    RequestOptions& ro = options[size_t(b)];
    ro.sampling = o_.sampling;
    ro.sampler = sampler_;
    ro.stop_tokens = o_.stop_tokens;
    ro.stop_strings = o_.stop_strings;
    ro.max_new_tokens = turn.max_new_tokens;
    ro.keep_step_logits = o_.keep_step_logits;
    if (o_.on_text) ro.on_text = [this, b](const std::string& t) { o_.on_text(b, t); };
    if (o_.json_grammar) ro.constraint = std::make_shared<JsonConstraint>(o_.json_grammar, o_.vocabulary, o_.stop_tokens);
  }
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<int> ids =
      steps_.start(seqs, turn.prompt, options, first_turn_ && o_.keep_prompt_logits ? &r_.prompt_logits : nullptr);
  r_.prefill_ms += elapsed_ms(t0);
  if (first_turn_) {
    r_.tokens.resize(size_t(B));
    r_.texts.resize(size_t(B));
    r_.prompt_tokens.assign(size_t(B), 0);
    step_rows_.resize(size_t(B));
    first_turn_ = false;
  }
  try {
    for (;;) {
      t0 = std::chrono::steady_clock::now();
      if (!steps_.step()) break;
      r_.decode_ms += elapsed_ms(t0);
      ++r_.decode_steps;
    }
  } catch (...) {
    for (int id : ids) steps_.cancel(id), steps_.release(id);  // no request stays live after a failed turn
    throw;
  }

  for (int id : ids)
    if (steps_.request(id).stop_reason == StopReason::NonFinite) {
      const int seq = steps_.request(id).seq;
      for (int other : ids) steps_.release(other);
      throw Error("sequence " + std::to_string(seq) + ": the model produced NaN or Inf logits; check the weights");
    }
  size_t turn_steps = 0;
  for (int id : ids) turn_steps = std::max(turn_steps, steps_.request(id).tokens.size());
  r_.steps += int(turn_steps);
  r_.stop_reasons.assign(size_t(B), StopReason::MaxTokens);
  std::vector<std::string> texts;
  for (int b = 0; b < B; ++b) {
    const Request& r = steps_.request(ids[size_t(b)]);
    r_.tokens[size_t(b)].insert(r_.tokens[size_t(b)].end(), r.tokens.begin(), r.tokens.end());
    r_.texts[size_t(b)] += r.text;
    r_.stop_reasons[size_t(b)] = r.stop_reason;
    r_.prompt_tokens[size_t(b)] += r.prompt_tokens;
    if (o_.keep_step_logits) {
      std::vector<float>& rows = step_rows_[size_t(b)];
      rows.insert(rows.end(), r.step_logits.begin(), r.step_logits.end());
      rows.resize(rows.size() + (turn_steps - r.tokens.size()) * size_t(c_.vocab_size), 0.f);
    }
    texts.push_back(r.text);
    steps_.release(ids[size_t(b)]);
  }
  if (o_.keep_step_logits) {
    r_.step_logits.clear();
    for (const auto& rows : step_rows_) r_.step_logits.insert(r_.step_logits.end(), rows.begin(), rows.end());
  }
  return texts;
}

GenerationResult generate_all(LogitsSource& src, const ModelConfig& c, const std::vector<Turn>& turns) {
  if (turns.empty()) throw InputError("generation needs at least one turn");
  Generator g(src, c, {});
  for (const Turn& t : turns) g.run_turn(t);
  return g.result();
}

GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns) {
  SessionSource src(session);
  return generate_all(src, session.model().config(), turns);
}

}  // namespace splitdec
