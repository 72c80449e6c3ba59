// Generation over turns. Each turn's prompt is appended after everything so
// far (the last token chosen in the previous turn is fed first); tokens are
// then chosen (greedy or sampled) until a stop token, a stop string, or the
// turn's max_new_tokens. The same driver runs a Session under any plan or
// the recompute-everything reference, so they can be compared step by step.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "generate/sampler.h"
#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

class Session;
class Tokenizer;

// Where logits come from.
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
  std::vector<float> prompt(const PromptBatch& p, bool all_positions) override;
  std::vector<float> step(const std::vector<int>& tokens) override;

 private:
  Session& s_;
};

class ReferenceSource : public LogitsSource {
 public:
  ReferenceSource(const Model& m, MaskPolicy policy) : m_(m), policy_(policy) {}
  std::vector<float> prompt(const PromptBatch& p, bool all_positions) override;
  std::vector<float> step(const std::vector<int>& tokens) override;

 private:
  const Model& m_;
  MaskPolicy policy_;
  PromptBatch seq_;  // everything so far
};

struct GenerationOptions {
  SamplingOptions sampling;
  std::vector<int> stop_tokens;           // empty: the config's EOS ids
  std::vector<std::string> stop_strings;  // need a tokenizer
  const Tokenizer* tokenizer = nullptr;   // for text, stop strings and streaming
  // Streaming: each sequence's new text as soon as it is final (text that
  // could still become a stop string is held back).
  std::function<void(int seq, const std::string& text)> on_text;
};

enum class StopReason { MaxTokens, StopToken, StopString };
const char* stop_reason_name(StopReason r);

struct GenerationResult {
  std::vector<std::vector<int>> tokens;  // per sequence, every turn, stop tokens included
  std::vector<std::string> texts;        // per sequence, every turn, cut before a stop string
  std::vector<StopReason> stop_reasons;  // per sequence, of the last turn
  std::vector<float> step_logits;        // [batch, steps, vocab]; row k chose token k (turns concatenated)
  int steps = 0;
  std::vector<float> prompt_logits;      // [batch, seq, vocab] of the first turn's prompt
  std::vector<int64_t> prompt_tokens;    // per sequence, all turns, padding excluded
  double prefill_ms = 0, decode_ms = 0;  // wall time in prompt appends and in decode steps
  int decode_steps = 0;                  // decode calls (one token per sequence each)
};

class Generator {
 public:
  Generator(LogitsSource& source, const ModelConfig& config, GenerationOptions options);
  // Runs one turn and adds it to result(). Returns the text of this turn per sequence.
  std::vector<std::string> run_turn(const Turn& turn);
  const GenerationResult& result() const { return r_; }
  // The token chosen last and not yet fed (the next turn feeds it first).
  const std::vector<int>& pending() const { return pending_; }
  // Restores the pending token after the caller rewound a failed turn.
  void set_pending(std::vector<int> tokens) { pending_ = std::move(tokens); }

 private:
  LogitsSource& src_;
  const ModelConfig& c_;
  GenerationOptions o_;
  Sampler sampler_;
  GenerationResult r_;
  std::vector<std::vector<float>> steps_;  // per sequence
  std::vector<std::vector<int>> history_;  // per sequence: every token fed or chosen
  std::vector<int> pending_;
  bool first_turn_ = true;
};

// Greedy generation of all turns (the common case, and what tests compare).
GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns);
GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy);

}  // namespace splitdec
