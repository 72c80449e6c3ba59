// Greedy generation over turns: each turn's prompt is appended after the
// tokens generated so far, then tokens are chosen by argmax until EOS or the
// turn's max_new_tokens. The same driver runs a Session (any plan) or the
// recompute-everything reference, so both are compared step for step.
#pragma once

#include <vector>

#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

class Session;

struct GenerationResult {
  std::vector<std::vector<int>> tokens;  // per sequence, every turn; a turn stops after EOS
  std::vector<float> step_logits;        // [batch, steps, vocab]; row k chose token k (turns concatenated)
  int steps = 0;
  std::vector<float> prompt_logits;      // [batch, seq, vocab] of the first turn's prompt
  double prefill_ms = 0, decode_ms = 0;  // wall time in prompt appends and in decode steps
  int decode_steps = 0;                  // decode calls (one token per sequence each)
};

GenerationResult generate_greedy(Session& session, const std::vector<Turn>& turns);
GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy);

}  // namespace splitdec
