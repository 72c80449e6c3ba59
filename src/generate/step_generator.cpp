#include "generate/step_generator.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"

namespace splitdec {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::StopToken: return "stop_token";
    case StopReason::StopString: return "stop_string";
    case StopReason::Cancelled: return "cancelled";
    case StopReason::Length: return "length";
    case StopReason::NonFinite: return "non_finite_logits";
    case StopReason::NoAllowedToken: return "no_allowed_token";
  }
  return "?";
}

StepGenerator::StepGenerator(LogitsSource& source, const ModelConfig& config, const Tokenizer* tokenizer)
    : src_(source), c_(config), tok_(tokenizer) {}

StepGenerator::~StepGenerator() = default;

StepGenerator::SequenceState& StepGenerator::state(int seq) {
  if (seq < 0) throw InputError("sequence id " + std::to_string(seq) + " is negative");
  if (size_t(seq) >= seqs_.size()) seqs_.resize(size_t(seq) + 1);
  return seqs_[size_t(seq)];
}

int StepGenerator::pending(int seq) const { return size_t(seq) < seqs_.size() ? seqs_[size_t(seq)].pending : -1; }
void StepGenerator::set_pending(int seq, int token) { state(seq).pending = token; }

const std::vector<int>& StepGenerator::history(int seq) const {
  static const std::vector<int> none;
  return size_t(seq) < seqs_.size() ? seqs_[size_t(seq)].history : none;
}

void StepGenerator::truncate_history(int seq, size_t size) {
  std::vector<int>& h = state(seq).history;
  if (h.size() > size) h.resize(size);
}

void StepGenerator::forget_sequence(int seq) {
  for (const auto& [id, r] : requests_)
    if (r->seq == seq && !r->finished) throw InputError("sequence " + std::to_string(seq) + " has a live request");
  if (size_t(seq) < seqs_.size()) seqs_[size_t(seq)] = SequenceState{};
}

void StepGenerator::copy_sequence(int from, int to) {
  forget_sequence(to);  // refuses a live request on `to`
  const SequenceState copy = state(from);
  state(to) = copy;
}

const Request& StepGenerator::request(int id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) throw InputError("no request " + std::to_string(id));
  return *it->second;
}

Request& StepGenerator::live_request(int id) { return const_cast<Request&>(request(id)); }

bool StepGenerator::any_live() const {
  return std::any_of(requests_.begin(), requests_.end(), [](const auto& r) { return !r.second->finished; });
}

// Each sequence's pending token is fed first, as the first position of its
// prompt row: one batch when every sequence has one (or none), two when only
// some do (their rows are one position longer). Every group is checked
// before any is fed.
std::vector<float> StepGenerator::feed(const std::vector<int>& seqs, const PromptBatch& prompt, std::vector<float>* prompt_logits,
                                       std::vector<int64_t>* fed) {
  const int n = int(seqs.size());
  for (int seq : seqs)
    for (const auto& [id, r] : requests_)
      if (r->seq == seq && !r->finished) throw InputError("sequence " + std::to_string(seq) + " already has a live request");
  std::vector<int> with, without;
  for (int b = 0; b < n; ++b) (pending(seqs[size_t(b)]) >= 0 ? with : without).push_back(b);
  if (prompt_logits && !with.empty() && !without.empty())
    throw InputError("logits at every prompt position need every sequence to have a pending token, or none");
  // A group feeds the caller's prompt as it is when it covers every
  // sequence and none has a pending token; otherwise its own rows (a
  // selection, the pending tokens in front). The media rows are copied
  // only then.
  struct Group {
    std::vector<int> rows, seqs;
    std::optional<PromptBatch> own;
  };
  std::vector<Group> groups;
  for (const std::vector<int>* rows : {&with, &without}) {
    if (rows->empty()) continue;
    Group g;
    g.rows = *rows;
    std::vector<int> tokens;
    for (int b : *rows) g.seqs.push_back(seqs[size_t(b)]), tokens.push_back(pending(seqs[size_t(b)]));
    if (rows->size() != size_t(n)) g.own = prompt.select(*rows);
    if (rows == &with) g.own = PromptBatch::text_column(tokens).concat(g.own ? *g.own : prompt);
    groups.push_back(std::move(g));
  }
  // Two groups: both are checked before either is fed, so a refused one
  // leaves no sequence half fed. One group: the source's prompt() checks it
  // before it changes anything (the session validates a prompt once).
  if (groups.size() > 1)
    for (const Group& g : groups) src_.check_prompt(g.seqs, g.own ? *g.own : prompt);

  const size_t V = size_t(c_.vocab_size);
  std::vector<float> last(size_t(n) * V);
  for (const Group& g : groups) {
    const PromptBatch& fed_prompt = g.own ? *g.own : prompt;
    const std::vector<float> logits = src_.prompt(g.seqs, fed_prompt, prompt_logits != nullptr);
    const int S = fed_prompt.seq;
    for (size_t i = 0; i < g.rows.size(); ++i) {
      const float* row = logits.data() + (prompt_logits ? (i * size_t(S) + size_t(S - 1)) * V : i * V);
      std::copy_n(row, V, last.data() + size_t(g.rows[i]) * V);
    }
    if (prompt_logits) *prompt_logits = logits;  // one group: every sequence had a pending token or none
  }

  // Histories gain the prompt's real tokens (a pending token is in its history already).
  fed->assign(size_t(n), 0);
  for (int b = 0; b < n; ++b) {
    SequenceState& st = state(seqs[size_t(b)]);
    if (st.pending >= 0) ++(*fed)[size_t(b)];
    st.pending = -1;
    for (int s = 0; s < prompt.seq; ++s) {
      const size_t at = size_t(b) * size_t(prompt.seq) + size_t(s);
      if (!prompt.attention_mask[at]) continue;
      st.history.push_back(prompt.tokens[at]);
      ++(*fed)[size_t(b)];
    }
  }
  return last;
}

void StepGenerator::prefill(const std::vector<int>& seqs, const PromptBatch& prompt) {
  if (seqs.empty() || prompt.batch != int(seqs.size()))
    throw InputError("prefill: " + std::to_string(seqs.size()) + " sequences and " + std::to_string(prompt.batch) +
                     " prompt rows must agree");
  std::vector<int64_t> fed;
  feed(seqs, prompt, nullptr, &fed);
}

std::vector<int> StepGenerator::start(const std::vector<int>& seqs, const PromptBatch& prompt,
                                      const std::vector<RequestOptions>& options, std::vector<float>* prompt_logits) {
  const int n = int(seqs.size());
  if (n == 0 || prompt.batch != n || int(options.size()) != n)
    throw InputError("start: " + std::to_string(n) + " sequences, " + std::to_string(prompt.batch) + " prompt rows and " +
                     std::to_string(options.size()) + " request options must agree");
  // Everything that can be checked is checked before anything is fed.
  std::vector<std::unique_ptr<Request>> made;
  for (int b = 0; b < n; ++b) {
    const RequestOptions& o = options[size_t(b)];
    if (o.max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0");
    if (o.top_logprobs > 20) throw InputError("top_logprobs must lie in [0, 20]");
    if (!o.stop_strings.empty() && !tok_) throw InputError("stop strings need the model's tokenizer");
    auto r = std::make_unique<Request>();
    r->seq = seqs[size_t(b)];
    r->options = o;
    o.sampling.validate();
    o.sampling.check_vocabulary(c_.vocab_size);
    if (!r->options.sampler) r->options.sampler = std::make_shared<Sampler>(o.sampling);
    if (r->options.stop_tokens.empty()) r->options.stop_tokens = c_.eos_token_ids;
    r->stops = StopStrings(o.stop_strings);  // throws on an empty string
    made.push_back(std::move(r));
  }
  std::vector<int64_t> fed;
  const std::vector<float> last = feed(seqs, prompt, prompt_logits, &fed);
  const size_t V = size_t(c_.vocab_size);
  std::vector<int> ids;
  for (int b = 0; b < n; ++b) {
    Request& r = *made[size_t(b)];
    r.prompt_tokens = fed[size_t(b)];
    if (tok_) r.stream.emplace(*tok_, r.stops);
    ids.push_back(next_id_++);
    requests_.emplace(ids.back(), std::move(made[size_t(b)]));
  }
  std::vector<std::pair<int, std::string>> ready;
  for (int b = 0; b < n; ++b) {
    Request& r = *requests_.at(ids[size_t(b)]);
    ready.emplace_back(ids[size_t(b)], r.options.max_new_tokens == 0 ? finish(r, StopReason::MaxTokens)
                                                                      : choose(ids[size_t(b)], last.data() + size_t(b) * V));
  }
  try {
    stream(ready);
  } catch (...) {
    for (int id : ids) {
      cancel(id);
      release(id);
    }
    throw;
  }
  return ids;
}

bool StepGenerator::step() {
  std::vector<int> live, seqs, tokens;
  std::vector<std::pair<int, std::string>> ready;
  for (const auto& [id, r] : requests_) {
    if (r->finished) continue;
    if (src_.room(r->seq) < 1) {  // the last token cannot be fed: the reply ends here
      ready.emplace_back(id, finish(*r, StopReason::Length));
      continue;
    }
    live.push_back(id);
    seqs.push_back(r->seq);
    tokens.push_back(r->tokens.back());
  }
  if (live.empty()) {
    stream(ready);
    return false;
  }
  const std::vector<float> logits = src_.step(seqs, tokens);
  for (size_t i = 0; i < live.size(); ++i) ready.emplace_back(live[i], choose(live[i], logits.data() + i * size_t(c_.vocab_size)));
  stream(ready);
  return true;
}

void StepGenerator::stream(const std::vector<std::pair<int, std::string>>& ready) {
  for (const auto& [id, text] : ready) {
    const Request& r = request(id);
    if (!text.empty() && r.options.on_text) r.options.on_text(text);
  }
}

std::string StepGenerator::choose(int id, const float* logits) {
  Request& r = live_request(id);
  std::vector<int>& history = state(r.seq).history;
  std::vector<float> row(logits, logits + c_.vocab_size);
  if (!std::all_of(row.begin(), row.end(), [](float x) { return std::isfinite(x); })) return finish(r, StopReason::NonFinite);
  if (r.options.keep_step_logits) r.step_logits.insert(r.step_logits.end(), row.begin(), row.end());
  TokenConstraint* constraint = r.options.constraint.get();
  const int tok = r.options.sampler->choose(row, history, r.tokens, constraint);
  if (tok < 0) return finish(r, constraint->complete() ? StopReason::StopToken : StopReason::NoAllowedToken);
  if (constraint) constraint->accept(tok);
  history.push_back(tok);
  r.tokens.push_back(tok);
  const auto& stop_tokens = r.options.stop_tokens;
  if (std::find(stop_tokens.begin(), stop_tokens.end(), tok) != stop_tokens.end()) return finish(r, StopReason::StopToken);
  if (r.options.top_logprobs >= 0) {
    const SamplingOptions& o = r.options.sampling;
    r.logprobs.push_back(token_logprob(row, o.sample ? o.temperature : 1.f, tok, r.options.top_logprobs));
  }
  std::string ready;
  if (r.stream) {
    if (r.stream->push(tok)) return finish(r, StopReason::StopString);
    r.text = r.stream->text();
    ready = r.stream->take_ready(false);
  }
  if (int(r.tokens.size()) >= r.options.max_new_tokens) ready += finish(r, StopReason::MaxTokens);
  return ready;
}

std::string StepGenerator::finish(Request& r, StopReason why) {
  r.finished = true;
  r.stop_reason = why;
  // The last chosen token waits to be fed by the next request - unless the
  // step that fed it is the one whose logits were not finite.
  state(r.seq).pending = why == StopReason::NonFinite || r.tokens.empty() ? -1 : r.tokens.back();
  if (!r.stream) return {};
  r.text = r.stream->text();
  return r.stream->take_ready(true);
}

void StepGenerator::cancel(int id) {
  Request& r = live_request(id);
  if (!r.finished) finish(r, StopReason::Cancelled);  // held-back text is dropped, not streamed
}

void StepGenerator::release(int id) {
  if (!request(id).finished) throw InputError("request " + std::to_string(id) + " is still live; cancel it first");
  requests_.erase(id);
}

}  // namespace splitdec
