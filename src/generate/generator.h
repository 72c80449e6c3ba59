// Generation over turns for a batch that moves together: each turn's prompt
// is appended after everything so far (each sequence's last chosen token is
// fed first), then tokens are chosen (greedy or sampled) until a stop token,
// a stop string, or the turn's max_new_tokens. It is a loop over the
// step-wise generator (generate/step_generator.h), over a Session under any
// plan or the recompute-everything reference, so they can be compared.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "generate/json_schema.h"
#include "generate/logits_source.h"
#include "generate/sampler.h"
#include "generate/step_generator.h"
#include "generate/token_trie.h"
#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

class Session;
class Tokenizer;

struct GenerationOptions {
  SamplingOptions sampling;
  std::vector<int> stop_tokens;           // empty: the config's EOS ids
  std::vector<std::string> stop_strings;  // need a tokenizer
  const Tokenizer* tokenizer = nullptr;   // for text, stop strings and streaming
  // Streaming: each sequence's new text as soon as it is final (text that
  // could still become a stop string is held back).
  std::function<void(int seq, const std::string& text)> on_text;
  bool keep_prompt_logits = true;  // the first turn's logits at every prompt position
  bool keep_step_logits = true;    // the logits each token was chosen from
  // Structured output: each sequence's reply of each turn is a document of
  // this grammar, its tokens read through this vocabulary (both or neither).
  std::shared_ptr<const JsonGrammar> json_grammar;
  std::shared_ptr<const TokenTrie> vocabulary;
};

struct GenerationResult {
  std::vector<std::vector<int>> tokens;  // per sequence, every turn, stop tokens included
  std::vector<std::string> texts;        // per sequence, every turn, cut before a stop string
  std::vector<StopReason> stop_reasons;  // per sequence, of the last turn
  // [batch, steps, vocab]; row k chose token k (turns concatenated). A
  // sequence that stopped before the others has zero rows after its stop.
  std::vector<float> step_logits;
  int steps = 0;
  std::vector<float> prompt_logits;      // [batch, seq, vocab] of the first turn's prompt
  std::vector<int64_t> prompt_tokens;    // per sequence, all turns, padding excluded
  double prefill_ms = 0, decode_ms = 0;  // wall time in prompt appends and in decode steps
  int decode_steps = 0;                  // decode calls
};

class Generator {
 public:
  // Runs on sequences 0 .. batch-1 of `source`.
  Generator(LogitsSource& source, const ModelConfig& config, GenerationOptions options);
  // Runs one turn and adds it to result(). Returns the text of this turn per sequence.
  std::vector<std::string> run_turn(const Turn& turn);
  const GenerationResult& result() const { return r_; }
  // Replaces the streaming callback for the turns that follow.
  void set_on_text(std::function<void(int seq, const std::string& text)> on_text) { o_.on_text = std::move(on_text); }

 private:
  const ModelConfig& c_;
  GenerationOptions o_;
  std::shared_ptr<Sampler> sampler_;  // one random stream for the whole batch and every turn
  StepGenerator steps_;
  GenerationResult r_;
  std::vector<std::vector<float>> step_rows_;  // per sequence
  bool first_turn_ = true;
};

// Greedy generation of all turns from `source` (what tests compare).
GenerationResult generate_all(LogitsSource& source, const ModelConfig& config, const std::vector<Turn>& turns);
GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns);

}  // namespace splitdec
