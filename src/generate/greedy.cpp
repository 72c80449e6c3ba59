#include "generate/greedy.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "model/reference_forward.h"
#include "pipeline/session.h"

namespace splitdec {

namespace {

// Where logits come from: an incremental session or the reference.
class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // Appends a prompt; [batch, seq, vocab] when all_positions, else [batch, vocab].
  virtual std::vector<float> prompt(const PromptBatch& p, bool all_positions) = 0;
  virtual std::vector<float> step(const std::vector<int>& tokens) = 0;  // [batch, vocab]
};

class SessionSource : public LogitsSource {
 public:
  explicit SessionSource(Session& s) : s_(s) {}
  std::vector<float> prompt(const PromptBatch& p, bool all) override { return s_.append(p, all); }
  std::vector<float> step(const std::vector<int>& t) override { return s_.decode(t); }

 private:
  Session& s_;
};

class ReferenceSource : public LogitsSource {
 public:
  ReferenceSource(const Model& m, MaskPolicy policy) : m_(m), policy_(policy) {}
  std::vector<float> prompt(const PromptBatch& p, bool all) override {
    seq_ = seq_.batch == 0 ? p : seq_.concat(p);
    const std::vector<float> logits = reference_logits(m_, seq_, policy_);
    const int V = m_.config().vocab_size;
    std::vector<float> out;
    for (int b = 0; b < seq_.batch; ++b) {
      const float* rows = logits.data() + size_t(b) * size_t(seq_.seq) * size_t(V);
      const int first = all ? seq_.seq - p.seq : seq_.seq - 1;
      out.insert(out.end(), rows + size_t(first) * size_t(V), rows + size_t(seq_.seq) * size_t(V));
    }
    return out;
  }
  std::vector<float> step(const std::vector<int>& t) override {
    PromptBatch col;
    col.batch = seq_.batch;
    col.seq = 1;
    col.tokens = t;
    col.modality.assign(t.size(), Modality::Text);
    col.attention_mask.assign(t.size(), 1);
    return prompt(col, false);
  }

 private:
  const Model& m_;
  MaskPolicy policy_;
  PromptBatch seq_;
};

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

GenerationResult drive(LogitsSource& src, const ModelConfig& c, const std::vector<Turn>& turns) {
  if (turns.empty()) throw InputError("generation needs at least one turn");
  const int B = turns[0].prompt.batch, V = c.vocab_size;
  GenerationResult r;
  r.tokens.resize(size_t(B));
  std::vector<std::vector<float>> steps(static_cast<size_t>(B));
  std::vector<int> pending;  // chosen last turn, not yet fed to the model
  for (size_t t = 0; t < turns.size(); ++t) {
    const Turn& turn = turns[t];
    if (turn.max_new_tokens < 0) throw InputError("turn " + std::to_string(t) + ": max_new_tokens must be >= 0");
    PromptBatch prompt = turn.prompt;
    if (!pending.empty()) {
      PromptBatch col;
      col.batch = B;
      col.seq = 1;
      col.tokens = pending;
      col.modality.assign(size_t(B), Modality::Text);
      col.attention_mask.assign(size_t(B), 1);
      prompt = col.concat(prompt);
      pending.clear();
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits = src.prompt(prompt, t == 0);
    r.prefill_ms += elapsed_ms(t0);
    if (t == 0) {
      r.prompt_logits = logits;
      std::vector<float> last;
      for (int b = 0; b < B; ++b) {
        const float* row = logits.data() + (size_t(b) * size_t(prompt.seq) + size_t(prompt.seq - 1)) * size_t(V);
        last.insert(last.end(), row, row + V);
      }
      logits = std::move(last);
    }
    std::vector<bool> done(size_t(B), false);
    for (int k = 0; k < turn.max_new_tokens; ++k) {
      std::vector<int> next(static_cast<size_t>(B));
      for (int b = 0; b < B; ++b) {
        const float* row = logits.data() + size_t(b) * size_t(V);
        next[size_t(b)] = int(std::max_element(row, row + V) - row);
        steps[size_t(b)].insert(steps[size_t(b)].end(), row, row + V);
        if (!done[size_t(b)]) {
          r.tokens[size_t(b)].push_back(next[size_t(b)]);
          done[size_t(b)] = std::count(c.eos_token_ids.begin(), c.eos_token_ids.end(), next[size_t(b)]) > 0;
        }
      }
      ++r.steps;
      if (k + 1 == turn.max_new_tokens || std::all_of(done.begin(), done.end(), [](bool d) { return d; })) {
        pending = next;
        break;
      }
      t0 = std::chrono::steady_clock::now();
      logits = src.step(next);
      r.decode_ms += elapsed_ms(t0);
      ++r.decode_steps;
    }
  }
  for (const auto& s : steps) r.step_logits.insert(r.step_logits.end(), s.begin(), s.end());
  return r;
}

}  // namespace

GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns) {
  SessionSource src(session);
  return drive(src, session.model().config(), turns);
}

GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy) {
  ReferenceSource src(model, policy);
  return drive(src, model.config(), turns);
}

}  // namespace splitdec
