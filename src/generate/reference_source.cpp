#include "generate/reference_source.h"

#include "core/error.h"
#include "model/reference_forward.h"

namespace splitdec {


std::vector<float> ReferenceSource::prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all) {
  const int V = m_.config().vocab_size;
  std::vector<PromptBatch> next;
  std::vector<float> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PromptBatch row = p.select({int(i)});
    const auto it = seqs_.find(seqs[i]);
    next.push_back(it == seqs_.end() ? row : it->second.concat(row));
    const PromptBatch& all_so_far = next.back();
    if (all_so_far.seq > capacity_)
      throw CapacityError("a segment of " + std::to_string(p.seq) + " tokens at position " + std::to_string(all_so_far.seq - p.seq) +
                          " does not fit the capacity of " + std::to_string(capacity_) + " positions");
    const std::vector<float> logits = reference_logits(m_, all_so_far, policy_);  // validates before anything changes
    const int first = all ? all_so_far.seq - p.seq : all_so_far.seq - 1;
    out.insert(out.end(), logits.begin() + long(first) * V, logits.end());
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs_[seqs[i]] = std::move(next[i]);
  return out;
}

int64_t ReferenceSource::room(int seq) const {
  const auto it = seqs_.find(seq);
  return capacity_ - (it == seqs_.end() ? 0 : it->second.seq);
}

std::vector<float> ReferenceSource::step(const std::vector<int>& seqs, const std::vector<int>& t) {
  return prompt(seqs, PromptBatch::text_column(t), false);
}

GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy) {
  ReferenceSource src(model, policy);
  return generate_all(src, model.config(), turns);
}

}  // namespace splitdec
