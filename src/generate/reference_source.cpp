#include "generate/reference_source.h"

#include <type_traits>

#include "model/reference_forward.h"

namespace splitdec {

namespace {

// Row b of a batch as a batch of one (its media rows with it).
PromptBatch sequence_of(const PromptBatch& p, int b, size_t H) {
  PromptBatch one;
  one.batch = 1;
  one.seq = p.seq;
  const auto row = [&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    return v.empty() ? V{} : V(v.begin() + long(b) * p.seq, v.begin() + long(b + 1) * p.seq);
  };
  one.tokens = row(p.tokens);
  one.modality = row(p.modality);
  one.attention_mask = row(p.attention_mask);
  one.block_ids = row(p.block_ids);
  if (!p.media.empty()) {
    const auto [first, count] = p.sequence_media_rows(b);
    one.media.assign(p.media.begin() + long(size_t(first) * H), p.media.begin() + long(size_t(first + count) * H));
  }
  return one;
}

}  // namespace

std::vector<float> ReferenceSource::prompt(const std::vector<int>& seqs, const PromptBatch& p, bool all) {
  const int V = m_.config().vocab_size;
  std::vector<PromptBatch> next;
  std::vector<float> out;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const PromptBatch row = sequence_of(p, int(i), size_t(m_.config().hidden_size));
    const auto it = seqs_.find(seqs[i]);
    next.push_back(it == seqs_.end() ? row : it->second.concat(row));
    const PromptBatch& all_so_far = next.back();
    const std::vector<float> logits = reference_logits(m_, all_so_far, policy_);  // validates before anything changes
    const int first = all ? all_so_far.seq - p.seq : all_so_far.seq - 1;
    out.insert(out.end(), logits.begin() + long(first) * V, logits.end());
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs_[seqs[i]] = std::move(next[i]);
  return out;
}

std::vector<float> ReferenceSource::step(const std::vector<int>& seqs, const std::vector<int>& t) {
  return prompt(seqs, PromptBatch::text_column(t), false);
}

GenerationResult reference_generate(const Model& model, const std::vector<Turn>& turns, MaskPolicy policy) {
  ReferenceSource src(model, policy);
  return generate_all(src, model.config(), turns);
}

}  // namespace splitdec
