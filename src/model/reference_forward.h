// The oracle: the whole prompt recomputed from scratch with naive attention
// that asks the mask contract about every (query, key) pair. Slow and
// obviously correct; every execution plan is checked against it.
#pragma once

#include <vector>

#include "model/embedding.h"  // embed_prompt, for callers that still take it from here
#include "model/gemma_model.h"
#include "model/prompt_batch.h"

namespace splitdec {

// Full-sequence attention over the whole batch: every (query, key) pair is
// decided by visible(), softmax in fp32, rows with no visible key give zeros.
class ReferenceAttention : public AttentionStage {
 public:
  ReferenceAttention(const ModelConfig& config, const PromptBatch& prompt, MaskPolicy policy);
  void attend(int layer, const float* q, const float* k, const float* v, float* out) override;

 private:
  const ModelConfig& c_;
  const PromptBatch& p_;
  MaskPolicy policy_;
  std::vector<std::vector<int>> blocks_;
  std::vector<std::vector<float>> k_, v_;  // per layer [rows, Hkv, hd]
};

// Logits [batch, seq, vocab] for every position.
std::vector<float> reference_logits(const Model& model, const PromptBatch& prompt, MaskPolicy policy);

}  // namespace splitdec
