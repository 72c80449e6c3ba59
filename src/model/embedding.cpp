#include "model/embedding.h"

#include <algorithm>

namespace splitdec {

std::vector<float> embed_prompt(const Model& model, const PromptBatch& p, const float* const* sequence_media) {
  const int H = model.config().hidden_size;
  std::vector<float> hidden(size_t(p.rows()) * size_t(H));
  model.embed(p.tokens.data(), int(p.rows()), hidden.data());
  if (p.media.empty() && !sequence_media) return hidden;
  // Media rows replace the placeholder embeddings unscaled, in order.
  const float* next = p.media.data();
  for (int b = 0; b < p.batch; ++b) {
    if (sequence_media) next = sequence_media[b];
    for (int64_t r = int64_t(b) * p.seq; r < int64_t(b + 1) * p.seq; ++r) {
      if (p.modality[size_t(r)] == Modality::Text) continue;
      std::copy_n(next, H, hidden.data() + size_t(r) * size_t(H));
      next += H;
    }
  }
  return hidden;
}

std::vector<float> embed_per_layer(const Model& model, const PromptBatch& p, const std::vector<float>& hidden,
                                   bool rows_independent, const CpuContext& cpu) {
  const ModelConfig& c = model.config();
  if (!model.has_per_layer_inputs()) return {};
  std::vector<int> ids(p.tokens.begin(), p.tokens.end());
  for (size_t r = 0; r < ids.size(); ++r)
    if (p.modality[r] != Modality::Text) ids[r] = c.pad_token_id;
  std::vector<float> out(size_t(c.num_layers) * size_t(p.rows()) * size_t(c.per_layer_dim));
  model.per_layer_inputs(ids.data(), hidden.data(), int(p.rows()), out.data(), rows_independent, cpu);
  return out;
}

}  // namespace splitdec
