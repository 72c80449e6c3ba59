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

}  // namespace splitdec
