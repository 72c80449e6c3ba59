#include "model/embedding.h"

#include <algorithm>

namespace splitdec {

std::vector<float> embed_prompt(const Model& model, const PromptBatch& p) {
  const int H = model.config().hidden_size;
  std::vector<float> hidden(size_t(p.rows()) * size_t(H));
  model.embed(p.tokens.data(), int(p.rows()), hidden.data());
  if (!p.media.empty()) {
    // Media rows replace the placeholder embeddings unscaled, in order.
    size_t next = 0;
    for (int64_t r = 0; r < p.rows(); ++r) {
      if (p.modality[size_t(r)] == Modality::Text) continue;
      std::copy_n(p.media.data() + next * size_t(H), H, hidden.data() + size_t(r) * size_t(H));
      ++next;
    }
  }
  return hidden;
}

std::vector<float> embed_per_layer(const Model& model, const PromptBatch& p, const std::vector<float>& hidden,
                                   bool rows_independent) {
  const ModelConfig& c = model.config();
  if (!model.has_per_layer_inputs()) return {};
  std::vector<int> ids(p.tokens.begin(), p.tokens.end());
  for (size_t r = 0; r < ids.size(); ++r)
    if (p.modality[r] != Modality::Text) ids[r] = c.pad_token_id;
  std::vector<float> out(size_t(c.num_layers) * size_t(p.rows()) * size_t(c.per_layer_dim));
  model.per_layer_inputs(ids.data(), hidden.data(), int(p.rows()), out.data(), rows_independent);
  return out;
}

}  // namespace splitdec
