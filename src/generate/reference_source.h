// The oracle as a logits source: every call recomputes each sequence from
// its first token with the reference forward pass. Slow and obviously
// correct; the `reference` plan and the tests use it, the runtime never does.
#pragma once

#include <cstdint>
#include <map>

#include "generate/logits_source.h"
#include "generate/generator.h"
#include "model/gemma_model.h"

namespace splitdec {

class ReferenceSource : public LogitsSource {
 public:
  // capacity: the most positions a sequence may hold (as a session's KV capacity).
  ReferenceSource(const Model& m, MaskPolicy policy, int64_t capacity = INT64_MAX) : m_(m), policy_(policy), capacity_(capacity) {}
  std::vector<float> prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all_positions) override;
  std::vector<float> step(const std::vector<int>& seqs, const std::vector<int>& tokens) override;
  int64_t room(int seq) const override;

 private:
  const Model& m_;
  MaskPolicy policy_;
  int64_t capacity_;
  std::map<int, PromptBatch> seqs_;  // everything so far, per sequence (batch 1)
};

// Greedy generation of all turns by the reference (what tests compare plans with).
GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy);

}  // namespace splitdec
