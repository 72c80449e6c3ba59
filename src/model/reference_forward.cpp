#include "model/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/gemm_bf16.h"

namespace splitdec {

ReferenceAttention::ReferenceAttention(const ModelConfig& c, const PromptBatch& p, MaskPolicy policy)
    : c_(c), p_(p), policy_(policy), k_(size_t(c.num_layers)), v_(size_t(c.num_layers)) {
  for (int b = 0; b < p.batch; ++b) blocks_.push_back(p.sequence_block_ids(b));
}

void ReferenceAttention::attend(int layer, const float* q, const float* k, const float* v, float* out) {
  const LayerSpec& spec = c_.layers[size_t(layer)];
  const int hd = spec.head_dim, Hq = c_.num_heads, Hkv = spec.num_kv_heads, S = p_.seq;
  const size_t n = size_t(p_.rows()) * size_t(Hkv) * size_t(hd);
  if (k) {
    k_[size_t(layer)].assign(k, k + n);
    v_[size_t(layer)].assign(v, v + n);
  }
  const std::vector<float>& K = k_[size_t(spec.kv_source)];
  const std::vector<float>& V = v_[size_t(spec.kv_source)];
  const LayerMaskRule rule = layer_mask_rule(policy_, spec.type, spec.window);
  const int group = Hq / Hkv;
  std::vector<float> scores(static_cast<size_t>(S));
  for (int b = 0; b < p_.batch; ++b) {
    const std::vector<int>& blk = blocks_[size_t(b)];
    for (int i = 0; i < S; ++i) {
      for (int h = 0; h < Hq; ++h) {
        const float* qi = q + ((int64_t(b) * S + i) * Hq + h) * hd;
        const int kvh = h / group;
        float m = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < S; ++j) {
          const bool pad = p_.attention_mask[size_t(b) * size_t(S) + size_t(j)] == 0;
          if (!visible(rule, i, j, blk[size_t(i)], blk[size_t(j)], pad)) {
            scores[size_t(j)] = -std::numeric_limits<float>::infinity();
            continue;
          }
          const float* kj = K.data() + ((int64_t(b) * S + j) * Hkv + kvh) * hd;
          float dot = 0.f;
          for (int d = 0; d < hd; ++d) dot += qi[d] * kj[d];
          scores[size_t(j)] = dot * c_.attn_scale;
          m = std::max(m, scores[size_t(j)]);
        }
        float* o = out + ((int64_t(b) * S + i) * Hq + h) * hd;
        std::fill(o, o + hd, 0.f);
        if (m == -std::numeric_limits<float>::infinity()) continue;  // no visible key: zeros
        float denom = 0.f;
        for (int j = 0; j < S; ++j) {
          const float e = std::isinf(scores[size_t(j)]) ? 0.f : std::exp(scores[size_t(j)] - m);
          scores[size_t(j)] = e;
          denom += e;
        }
        for (int j = 0; j < S; ++j) {
          if (scores[size_t(j)] == 0.f) continue;
          const float wgt = scores[size_t(j)] / denom;
          const float* vj = V.data() + ((int64_t(b) * S + j) * Hkv + kvh) * hd;
          for (int d = 0; d < hd; ++d) o[d] += wgt * vj[d];
        }
      }
    }
  }
}

std::vector<float> reference_logits(const Model& model, const PromptBatch& p, MaskPolicy policy) {
  validate_prompt_batch(p, model.config());
  const ExactGemmOnThisThread exact;  // bf16 products are a fast path's, never the reference's
  std::vector<float> hidden = embed_prompt(model, p);
  const std::vector<int64_t> positions = p.rope_positions();
  const std::vector<float> per_layer = embed_per_layer(model, p, hidden);
  ReferenceAttention attention(model.config(), p, policy);
  model.run_layers(hidden.data(), int(p.rows()), positions.data(), attention, false,
                   per_layer.empty() ? nullptr : per_layer.data());
  std::vector<float> logits(size_t(p.rows()) * size_t(model.config().vocab_size));
  model.logits(hidden.data(), int(p.rows()), logits.data());
  return logits;
}

}  // namespace splitdec
