#include "model/gemma_model.h"

#include <cmath>

#include "io/safetensors.h"
#include "kernels/linear.h"
#include "kernels/reference_ops.h"

namespace splitdec {

Model Model::load(const std::string& dir, const std::function<void(size_t, size_t)>& progress) {
  ModelConfig config = load_model_config(dir);
  TensorStore store = TensorStore::open_dir(dir);
  ModelWeights weights = load_weights(config, store, progress);
  return Model(std::move(config), std::move(weights));
}

Model::Model(ModelConfig config, ModelWeights weights) : config_(std::move(config)), weights_(std::move(weights)) {}

void Model::embed(const int* tokens, int rows, float* hidden) const {
  const int H = config_.hidden_size;
  const float scale = round_to_dtype(std::sqrt(float(H)), weights_.dtype);
  for (int r = 0; r < rows; ++r) {
    float* h = hidden + int64_t(r) * H;
    weights_.embed_tokens.row_f32(tokens[r], h);
    for (int k = 0; k < H; ++k) h[k] *= scale;
  }
}

// Activations of one layer; kept across the layers of a call so that a
// decode step allocates once, not once per layer.
struct Model::LayerScratch {
  std::vector<float> x, q, k, v, attn, o, gate, up;
};

void Model::run_layers(float* hidden, int rows, const int64_t* positions, AttentionStage& attention) const {
  LayerScratch scratch;
  for (int l = 0; l < config_.num_layers; ++l) run_layer(l, hidden, rows, positions, attention, scratch);
}

// out = h + post_ff_norm(down(gelu(gate(h')) * up(h'))), h' = pre_ff_norm(h),
// h = x + post_attn_norm(attn(input_norm(x))); Gemma-4 then scales by layer_scalar.
void Model::run_layer(int l, float* hidden, int rows, const int64_t* positions, AttentionStage& attention,
                      LayerScratch& scratch) const {
  const ModelConfig& c = config_;
  const LayerSpec& spec = c.layers[size_t(l)];
  const LayerWeights& w = weights_.layers[size_t(l)];
  const int H = c.hidden_size, hd = spec.head_dim, Hq = c.num_heads, Hkv = spec.num_kv_heads;
  const int I = spec.intermediate_size;
  const float eps = c.rms_norm_eps;
  const bool add1 = c.norm_adds_one;
  const bool shared = c.is_kv_shared(l);

  auto& [x, q, k, v, attn, o, gate, up] = scratch;
  x.resize(size_t(rows) * H);
  for (int r = 0; r < rows; ++r)
    ref::rms_norm(hidden + int64_t(r) * H, w.input_norm.data(), H, eps, add1, x.data() + int64_t(r) * H);

  q.resize(size_t(rows) * Hq * hd);
  linear(x.data(), rows, w.q_proj, q.data());
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < Hq; ++h) {
      float* qh = q.data() + (int64_t(r) * Hq + h) * hd;
      ref::rms_norm(qh, w.q_norm.data(), hd, eps, add1, qh);
      ref::rope(qh, hd, spec.inv_freq.data(), positions[r]);
    }
  if (!shared) {
    k.resize(size_t(rows) * Hkv * hd);
    v.resize(k.size());
    linear(x.data(), rows, w.k_proj, k.data());
    if (spec.k_eq_v) v = k;  // raw k_proj output, before k_norm and RoPE
    else linear(x.data(), rows, w.v_proj, v.data());
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < Hkv; ++h) {
        float* kh = k.data() + (int64_t(r) * Hkv + h) * hd;
        ref::rms_norm(kh, w.k_norm.data(), hd, eps, add1, kh);
        ref::rope(kh, hd, spec.inv_freq.data(), positions[r]);
        if (c.family == Family::Gemma4) {  // v_norm: RMS norm without weight
          float* vh = v.data() + (int64_t(r) * Hkv + h) * hd;
          ref::rms_norm(vh, nullptr, hd, eps, false, vh);
        }
      }
  }

  attn.resize(size_t(rows) * Hq * hd);
  attention.attend(l, q.data(), shared ? nullptr : k.data(), shared ? nullptr : v.data(), attn.data());

  o.resize(size_t(rows) * H);
  linear(attn.data(), rows, w.o_proj, o.data());
  for (int r = 0; r < rows; ++r) {
    float* hr = hidden + int64_t(r) * H;
    float* orow = o.data() + int64_t(r) * H;
    ref::rms_norm(orow, w.post_attention_norm.data(), H, eps, add1, orow);
    for (int k2 = 0; k2 < H; ++k2) hr[k2] += orow[k2];
    ref::rms_norm(hr, w.pre_feedforward_norm.data(), H, eps, add1, x.data() + int64_t(r) * H);
  }

  gate.resize(size_t(rows) * I);
  up.resize(size_t(rows) * I);
  linear(x.data(), rows, w.gate_proj, gate.data());
  linear(x.data(), rows, w.up_proj, up.data());
  for (size_t k2 = 0; k2 < gate.size(); ++k2) gate[k2] = ref::gelu_tanh(gate[k2]) * up[k2];
  linear(gate.data(), rows, w.down_proj, o.data());
  for (int r = 0; r < rows; ++r) {
    float* hr = hidden + int64_t(r) * H;
    float* orow = o.data() + int64_t(r) * H;
    ref::rms_norm(orow, w.post_feedforward_norm.data(), H, eps, add1, orow);
    for (int k2 = 0; k2 < H; ++k2) hr[k2] = (hr[k2] + orow[k2]) * w.layer_scalar;
  }
}

void Model::logits(const float* hidden, int rows, float* out) const {
  const int H = config_.hidden_size, V = config_.vocab_size;
  std::vector<float> x(size_t(rows) * H);
  for (int r = 0; r < rows; ++r)
    ref::rms_norm(hidden + int64_t(r) * H, weights_.final_norm.data(), H, config_.rms_norm_eps, config_.norm_adds_one,
                  x.data() + int64_t(r) * H);
  linear(x.data(), rows, weights_.output_matrix(), out);
  if (config_.final_logit_softcap) {
    const float cap = *config_.final_logit_softcap;
    for (int64_t k = 0; k < int64_t(rows) * V; ++k) out[k] = cap * std::tanh(out[k] / cap);
  }
}

}  // namespace splitdec
