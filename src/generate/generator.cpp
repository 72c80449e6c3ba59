#include "generate/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "io/tokenizer.h"
#include "model/reference_forward.h"
#include "pipeline/session.h"

namespace splitdec {

std::vector<float> SessionSource::prompt(const PromptBatch& p, bool all) { return s_.append(p, all); }
std::vector<float> SessionSource::step(const std::vector<int>& t) { return s_.decode(t); }

std::vector<float> ReferenceSource::prompt(const PromptBatch& p, bool all) {
  PromptBatch next = seq_.batch == 0 ? p : seq_.concat(p);
  const std::vector<float> logits = reference_logits(m_, next, policy_);  // validates before seq_ changes
  seq_ = std::move(next);
  const int V = m_.config().vocab_size;
  std::vector<float> out;
  for (int b = 0; b < seq_.batch; ++b) {
    const float* rows = logits.data() + size_t(b) * size_t(seq_.seq) * size_t(V);
    const int first = all ? seq_.seq - p.seq : seq_.seq - 1;
    out.insert(out.end(), rows + size_t(first) * size_t(V), rows + size_t(seq_.seq) * size_t(V));
  }
  return out;
}

std::vector<float> ReferenceSource::step(const std::vector<int>& t) { return prompt(PromptBatch::text_column(t), false); }

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::StopToken: return "stop_token";
    case StopReason::StopString: return "stop_string";
  }
  return "?";
}

namespace {

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One sequence's text in a turn: decoded tokens, stop-string search, and
// what may already be streamed.
struct TextState {
  std::vector<int> tokens;  // this turn, stop tokens excluded
  std::string text;
  size_t emitted = 0;
};

// A decoded tail that is an incomplete UTF-8 character shows as U+FFFD and
// may change with the next byte token: hold it back.
size_t stable_length(const std::string& s) {
  static const std::string replacement = "\xEF\xBF\xBD";
  return s.size() >= 3 && s.compare(s.size() - 3, 3, replacement) == 0 ? s.size() - 3 : s.size();
}

}  // namespace

Generator::Generator(LogitsSource& source, const ModelConfig& config, GenerationOptions options)
    : src_(source), c_(config), o_(std::move(options)), sampler_(o_.sampling) {
  if (o_.stop_tokens.empty()) o_.stop_tokens = c_.eos_token_ids;
  for (const auto& s : o_.stop_strings)
    if (s.empty()) throw InputError("a stop string must not be empty");
  if (!o_.stop_strings.empty() && !o_.tokenizer) throw InputError("stop strings need the model's tokenizer.model");
}

std::vector<std::string> Generator::run_turn(const Turn& turn) {
  const int B = turn.prompt.batch, V = c_.vocab_size;
  if (turn.max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0");
  if (first_turn_) {
    r_.tokens.resize(size_t(B));
    r_.texts.resize(size_t(B));
    r_.prompt_tokens.assign(size_t(B), 0);
    steps_.resize(size_t(B));
    history_.resize(size_t(B));
  } else if (B != int(r_.tokens.size())) {
    throw InputError("turn has " + std::to_string(B) + " sequences, the conversation " + std::to_string(r_.tokens.size()));
  }
  PromptBatch prompt = turn.prompt;
  if (!pending_.empty()) prompt = PromptBatch::text_column(pending_).concat(prompt);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = src_.prompt(prompt, first_turn_);
  r_.prefill_ms += elapsed_ms(t0);
  pending_.clear();
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < prompt.seq; ++s) {
      const size_t r = size_t(b) * size_t(prompt.seq) + size_t(s);
      if (!prompt.attention_mask[r]) continue;
      history_[size_t(b)].push_back(prompt.tokens[r]);
      ++r_.prompt_tokens[size_t(b)];
    }
  if (first_turn_) {
    r_.prompt_logits = logits;
    std::vector<float> last;
    for (int b = 0; b < B; ++b) {
      const float* row = logits.data() + (size_t(b) * size_t(prompt.seq) + size_t(prompt.seq - 1)) * size_t(V);
      last.insert(last.end(), row, row + V);
    }
    logits = std::move(last);
    first_turn_ = false;
  }

  size_t longest_stop = 0;
  for (const auto& s : o_.stop_strings) longest_stop = std::max(longest_stop, s.size());
  std::vector<TextState> text(static_cast<size_t>(B));
  std::vector<bool> done(size_t(B), false);
  r_.stop_reasons.assign(size_t(B), StopReason::MaxTokens);
  auto emit = [&](int b, bool final) {
    TextState& ts = text[size_t(b)];
    size_t end = final ? ts.text.size() : stable_length(ts.text);
    if (!final && longest_stop > 1) end = end >= longest_stop - 1 ? end - (longest_stop - 1) : 0;
    if (end > ts.emitted && o_.on_text) o_.on_text(b, ts.text.substr(ts.emitted, end - ts.emitted));
    ts.emitted = std::max(ts.emitted, end);
  };
  for (int k = 0; k < turn.max_new_tokens; ++k) {
    std::vector<int> next(static_cast<size_t>(B));
    for (int b = 0; b < B; ++b) {
      std::vector<float> row(logits.begin() + long(size_t(b) * size_t(V)), logits.begin() + long(size_t(b + 1) * size_t(V)));
      steps_[size_t(b)].insert(steps_[size_t(b)].end(), row.begin(), row.end());
      next[size_t(b)] = sampler_.choose(row, history_[size_t(b)]);
      history_[size_t(b)].push_back(next[size_t(b)]);
      if (done[size_t(b)]) continue;
      const int tok = next[size_t(b)];
      r_.tokens[size_t(b)].push_back(tok);
      if (std::count(o_.stop_tokens.begin(), o_.stop_tokens.end(), tok)) {
        done[size_t(b)] = true;
        r_.stop_reasons[size_t(b)] = StopReason::StopToken;
        continue;
      }
      if (!o_.tokenizer) continue;
      TextState& ts = text[size_t(b)];
      ts.tokens.push_back(tok);
      const size_t searched = ts.text.size();
      ts.text = o_.tokenizer->decode(ts.tokens);
      // A stop string may span token boundaries: search from just before the new text.
      size_t cut = std::string::npos;
      const size_t from = searched >= longest_stop ? searched - longest_stop + 1 : 0;
      for (const auto& s : o_.stop_strings) cut = std::min(cut, ts.text.find(s, std::min(from, ts.text.size())));
      if (cut != std::string::npos) {
        ts.text.resize(cut);
        done[size_t(b)] = true;
        r_.stop_reasons[size_t(b)] = StopReason::StopString;
      }
      emit(b, done[size_t(b)]);
    }
    ++r_.steps;
    if (k + 1 == turn.max_new_tokens || std::all_of(done.begin(), done.end(), [](bool d) { return d; })) {
      pending_ = next;
      break;
    }
    t0 = std::chrono::steady_clock::now();
    logits = src_.step(next);
    r_.decode_ms += elapsed_ms(t0);
    ++r_.decode_steps;
  }
  std::vector<std::string> turn_texts;
  for (int b = 0; b < B; ++b) {
    emit(b, true);
    r_.texts[size_t(b)] += text[size_t(b)].text;
    turn_texts.push_back(text[size_t(b)].text);
  }
  r_.step_logits.clear();
  for (const auto& s : steps_) r_.step_logits.insert(r_.step_logits.end(), s.begin(), s.end());
  return turn_texts;
}

namespace {
GenerationResult run_all(LogitsSource& src, const ModelConfig& c, const std::vector<Turn>& turns) {
  if (turns.empty()) throw InputError("generation needs at least one turn");
  Generator g(src, c, {});
  for (const Turn& t : turns) g.run_turn(t);
  return g.result();
}
}  // namespace

GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns) {
  SessionSource src(session);
  return run_all(src, session.model().config(), turns);
}

GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy) {
  ReferenceSource src(model, policy);
  return run_all(src, model.config(), turns);
}

}  // namespace splitdec
