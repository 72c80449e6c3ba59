#include "generate/step_generator.h"

#include <algorithm>

#include "core/error.h"

namespace splitdec {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::StopToken: return "stop_token";
    case StopReason::StopString: return "stop_string";
    case StopReason::Cancelled: return "cancelled";
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
  for (const auto& r : requests_)
    if (r && r->seq == seq && !r->finished) throw InputError("sequence " + std::to_string(seq) + " has a live request");
  if (size_t(seq) < seqs_.size()) seqs_[size_t(seq)] = SequenceState{};
}

const Request& StepGenerator::request(int id) const {
  if (id < 0 || size_t(id) >= requests_.size() || !requests_[size_t(id)])
    throw InputError("no request " + std::to_string(id));
  return *requests_[size_t(id)];
}

bool StepGenerator::any_live() const {
  return std::any_of(requests_.begin(), requests_.end(), [](const auto& r) { return r && !r->finished; });
}

std::vector<int> StepGenerator::start(const std::vector<int>& seqs, const PromptBatch& prompt,
                                      const std::vector<RequestOptions>& options, std::vector<float>* prompt_logits) {
  const int n = int(seqs.size());
  if (n == 0 || prompt.batch != n || int(options.size()) != n)
    throw InputError("start: " + std::to_string(n) + " sequences, " + std::to_string(prompt.batch) + " prompt rows and " +
                     std::to_string(options.size()) + " request options must agree");
  for (const RequestOptions& o : options) {
    if (o.max_new_tokens < 0) throw InputError("max_new_tokens must be >= 0");
    if (!o.stop_strings.empty() && !tok_) throw InputError("stop strings need the model's tokenizer");
    StopStrings check(o.stop_strings);  // throws on an empty string
  }
  for (int seq : seqs)
    for (const auto& r : requests_)
      if (r && r->seq == seq && !r->finished) throw InputError("sequence " + std::to_string(seq) + " already has a live request");

  // Each sequence's pending token is fed first: in the prompt itself when
  // every sequence has one (a batch that moves together), else as a step.
  std::vector<int> with_pending, pending_tokens;
  for (int seq : seqs)
    if (pending(seq) >= 0) with_pending.push_back(seq), pending_tokens.push_back(pending(seq));
  PromptBatch full = prompt;
  if (int(with_pending.size()) == n) full = PromptBatch::text_column(pending_tokens).concat(prompt);
  else if (!with_pending.empty()) src_.step(with_pending, pending_tokens);

  std::vector<float> logits = src_.prompt(seqs, full, prompt_logits != nullptr);
  const size_t V = size_t(c_.vocab_size);
  if (prompt_logits) {
    *prompt_logits = logits;
    std::vector<float> last;
    for (int b = 0; b < n; ++b) {
      const float* row = logits.data() + (size_t(b) * size_t(full.seq) + size_t(full.seq - 1)) * V;
      last.insert(last.end(), row, row + V);
    }
    logits = std::move(last);
  }

  std::vector<int> ids;
  for (int b = 0; b < n; ++b) {
    SequenceState& st = state(seqs[size_t(b)]);
    auto r = std::make_unique<Request>();
    r->seq = seqs[size_t(b)];
    r->options = options[size_t(b)];
    if (!r->options.sampler) r->options.sampler = std::make_shared<Sampler>(r->options.sampling);
    if (r->options.stop_tokens.empty()) r->options.stop_tokens = c_.eos_token_ids;
    r->stops = StopStrings(r->options.stop_strings);
    if (tok_) r->stream.emplace(*tok_, r->stops);
    if (st.pending >= 0 && int(with_pending.size()) != n) st.history.push_back(st.pending), ++r->prompt_tokens;
    st.pending = -1;
    for (int s = 0; s < full.seq; ++s) {
      const size_t at = size_t(b) * size_t(full.seq) + size_t(s);
      if (!full.attention_mask[at]) continue;
      st.history.push_back(full.tokens[at]);
      ++r->prompt_tokens;
    }
    ids.push_back(int(requests_.size()));
    requests_.push_back(std::move(r));
  }
  for (int b = 0; b < n; ++b) {
    Request& r = *requests_[size_t(ids[size_t(b)])];
    if (r.options.max_new_tokens == 0) finish(r, StopReason::MaxTokens);
    else choose(ids[size_t(b)], logits.data() + size_t(b) * V);
  }
  return ids;
}

bool StepGenerator::step() {
  std::vector<int> live, seqs, tokens;
  for (size_t id = 0; id < requests_.size(); ++id) {
    const Request* r = requests_[id].get();
    if (!r || r->finished) continue;
    live.push_back(int(id));
    seqs.push_back(r->seq);
    tokens.push_back(r->tokens.back());
  }
  if (live.empty()) return false;
  const std::vector<float> logits = src_.step(seqs, tokens);
  for (size_t i = 0; i < live.size(); ++i) choose(live[i], logits.data() + i * size_t(c_.vocab_size));
  return true;
}

void StepGenerator::choose(int id, const float* logits) {
  Request& r = *requests_[size_t(id)];
  std::vector<int>& history = state(r.seq).history;
  std::vector<float> row(logits, logits + c_.vocab_size);
  if (r.options.keep_step_logits) r.step_logits.insert(r.step_logits.end(), row.begin(), row.end());
  const int tok = r.options.sampler->choose(row, history);
  history.push_back(tok);
  r.tokens.push_back(tok);
  const auto& stop_tokens = r.options.stop_tokens;
  if (std::find(stop_tokens.begin(), stop_tokens.end(), tok) != stop_tokens.end()) return finish(r, StopReason::StopToken);
  if (r.stream) {
    if (r.stream->push(tok)) return finish(r, StopReason::StopString);
    r.text = r.stream->text();
    const std::string ready = r.stream->take_ready(false);
    if (!ready.empty() && r.options.on_text) r.options.on_text(ready);
  }
  if (int(r.tokens.size()) >= r.options.max_new_tokens) finish(r, StopReason::MaxTokens);
}

void StepGenerator::finish(Request& r, StopReason why) {
  r.finished = true;
  r.stop_reason = why;
  if (!r.tokens.empty()) state(r.seq).pending = r.tokens.back();
  if (r.stream) {
    r.text = r.stream->text();
    const std::string ready = r.stream->take_ready(true);
    if (!ready.empty() && r.options.on_text) r.options.on_text(ready);
  }
}

void StepGenerator::cancel(int id) {
  request(id);  // throws for an unknown id
  Request& r = *requests_[size_t(id)];
  if (!r.finished) finish(r, StopReason::Cancelled);
}

void StepGenerator::release(int id) {
  if (!request(id).finished) throw InputError("request " + std::to_string(id) + " is still live; cancel it first");
  requests_[size_t(id)].reset();
}

}  // namespace splitdec
