// Batches that move together, turn by turn, from exact token inputs: what
// `splitdec generate` runs, and how plans are compared with the reference.
//
//   auto engine = splitdec::Engine::load("models/tiny");
//   splitdec::Batch batch(engine, 2, {.plan = splitdec::ExecutionPlan::Split});
//   for (const auto& turn : splitdec::read_inputs_json("turns.json", *engine)) batch.run_turn(turn, {});
//   batch.result().tokens[1];
#pragma once

#include "splitdec/splitdec.h"

namespace splitdec {

// `splitdec generate --input` files: one turn in the TokenInputs form
// ({"tokens": [[...]], "modality": [[...]], "attention_mask", "block_ids",
// "media_embeddings": "file.npy"}) or {"turns": [turn, ...]} with an
// optional "max_new_tokens" per turn. Errors name the file, turn and key.
std::vector<TokenInputs> read_inputs_json(const std::string& path, const Engine& engine);

struct BatchResult {
  std::vector<std::vector<int>> tokens;   // per sequence, every turn, stop tokens included
  std::vector<std::string> texts;         // per sequence, every turn (with a tokenizer)
  std::vector<std::string> stop_reasons;  // per sequence, of the last turn
  std::vector<int64_t> prompt_tokens;     // per sequence, all turns, padding excluded
  std::vector<float> prompt_logits;       // [batch, seq, vocab] of the first turn (keep_prompt_logits)
  std::vector<float> step_logits;         // [batch, steps, vocab] (keep_step_logits); zero rows after a stop
  int steps = 0;
  double prefill_ms = 0, decode_ms = 0;
  int decode_steps = 0;
};

class Batch {
 public:
  // ExecutionPlan::Reference recomputes every sequence from scratch at each step (the oracle).
  Batch(std::shared_ptr<const Engine> engine, int sequences, ConversationOptions options = {});
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Appends the turn after everything so far (each sequence's last chosen
  // token first) and generates; on_text(sequence, text) streams the replies.
  // Sampling options, stop strings and logits choices are the first turn's.
  std::vector<std::string> run_turn(const TokenInputs& turn, const GenerateOptions& options,
                                    const std::function<void(int, const std::string&)>& on_text = {});
  const BatchResult& result() const;
  std::vector<TraceStep> trace() const;  // empty under the reference plan
  std::string describe_memory() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace splitdec
