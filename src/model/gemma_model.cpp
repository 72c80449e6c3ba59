#include "model/gemma_model.h"

#include <cmath>
#include <stdexcept>

#include "core/aligned_vector.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/mixture_of_experts.h"
#include "model/per_layer_embeddings.h"

namespace splitdec {

Model Model::load(const std::string& dir, const std::function<void(size_t, size_t)>& progress, const WeightLoading& loading,
                  const std::string& mmproj) {
  ModelConfig config = load_model_config(dir, mmproj);
  auto store = std::make_shared<const TensorStore>(TensorStore::open_dir(dir));
  ModelWeights weights = load_weights(config, store, progress, loading);
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
  AlignedVector<float> x, q, k, v, attn, o, gate, up, moe;  // linear()'s rows start on cache lines
};

void Model::per_layer_inputs(const int* table_tokens, const float* hidden, int rows, float* out, bool rows_independent,
                             const CpuContext& cpu) const {
  splitdec::per_layer_inputs(config_, weights_, table_tokens, hidden, rows, out, rows_independent, cpu);
}

void Model::run_layers(float* hidden, int rows, const int64_t* positions, AttentionStage& attention, bool rows_independent,
                       const float* per_layer, const CpuContext& cpu) const {
  if (has_per_layer_inputs() && !per_layer)
    throw std::logic_error("run_layers: this model has per-layer embeddings and none were given");
  LayerScratch scratch;
  for (int l = 0; l < config_.num_layers; ++l)
    run_layer(l, hidden, rows, positions, attention, scratch, rows_independent,
              per_layer ? per_layer + int64_t(l) * rows * config_.per_layer_dim : nullptr, cpu);
}

// out = h + post_ff_norm(down(gelu(gate(h')) * up(h'))), h' = pre_ff_norm(h),
// h = x + post_attn_norm(attn(input_norm(x))). Gemma-4: with experts the
// MLP term is post_ff_norm_1(mlp) + post_ff_norm_2(experts(pre_ff_norm_2(h)))
// inside post_ff_norm; with per-layer embeddings out += the layer's
// per-layer term; then out is scaled by layer_scalar.
void Model::run_layer(int l, float* hidden, int rows, const int64_t* positions, AttentionStage& attention,
                      LayerScratch& scratch, bool rows_independent, const float* per_layer, const CpuContext& cpu) const {
  const ModelConfig& c = config_;
  const LayerSpec& spec = c.layers[size_t(l)];
  const LayerWeights& w = weights_.layers[size_t(l)];
  const int H = c.hidden_size, hd = spec.head_dim, Hq = c.num_heads, Hkv = spec.num_kv_heads;
  const int I = spec.intermediate_size;
  const float eps = c.rms_norm_eps;
  const bool add1 = c.norm_adds_one;
  const bool shared = c.is_kv_shared(l);

  auto& [x, q, k, v, attn, o, gate, up, moe] = scratch;
  x.resize(size_t(rows) * H);
  ops::rms_norm(hidden, w.input_norm.data(), rows, H, eps, add1, x.data());

  q.resize(size_t(rows) * Hq * hd);
  linear(x.data(), rows, w.q_proj, q.data(), rows_independent, cpu);
  ops::rms_norm(q.data(), w.q_norm.data(), rows * Hq, hd, eps, add1, q.data());
  for (int r = 0; r < rows; ++r) ops::rope(q.data() + int64_t(r) * Hq * hd, Hq, hd, spec.inv_freq.data(), positions[r]);
  if (!shared) {
    k.resize(size_t(rows) * Hkv * hd);
    v.resize(k.size());
    linear(x.data(), rows, w.k_proj, k.data(), rows_independent, cpu);
    if (spec.k_eq_v) v = k;  // raw k_proj output, before k_norm and RoPE
    else linear(x.data(), rows, w.v_proj, v.data(), rows_independent, cpu);
    ops::rms_norm(k.data(), w.k_norm.data(), rows * Hkv, hd, eps, add1, k.data());
    for (int r = 0; r < rows; ++r) ops::rope(k.data() + int64_t(r) * Hkv * hd, Hkv, hd, spec.inv_freq.data(), positions[r]);
    if (spec.v_norm)  // RMS norm without weight
      ops::rms_norm(v.data(), nullptr, rows * Hkv, hd, eps, false, v.data());
  }

  attn.resize(size_t(rows) * Hq * hd);
  attention.attend(l, q.data(), shared ? nullptr : k.data(), shared ? nullptr : v.data(), attn.data());

  o.resize(size_t(rows) * H);
  linear(attn.data(), rows, w.o_proj, o.data(), rows_independent, cpu);
  ops::rms_norm(o.data(), w.post_attention_norm.data(), rows, H, eps, add1, o.data());
  ops::residual_add(hidden, o.data(), o.size());
  ops::rms_norm(hidden, w.pre_feedforward_norm.data(), rows, H, eps, add1, x.data());

  gate.resize(size_t(rows) * I);
  up.resize(size_t(rows) * I);
  linear(x.data(), rows, w.gate_proj, gate.data(), rows_independent, cpu);
  linear(x.data(), rows, w.up_proj, up.data(), rows_independent, cpu);
  ops::gelu_tanh_gate(gate.data(), up.data(), gate.size(), cpu);
  linear(gate.data(), rows, w.down_proj, o.data(), rows_independent, cpu);
  if (spec.num_experts > 0) {
    ops::rms_norm(o.data(), w.post_feedforward_norm_1.data(), rows, H, eps, add1, o.data());
    ops::rms_norm(hidden, w.pre_feedforward_norm_2.data(), rows, H, eps, add1, x.data());
    moe.resize(size_t(rows) * H);
    mixture_of_experts(c, spec, w, hidden, x.data(), rows, moe.data(), rows_independent, cpu);
    ops::rms_norm(moe.data(), w.post_feedforward_norm_2.data(), rows, H, eps, add1, moe.data());
    ops::residual_add(o.data(), moe.data(), o.size());
  }
  ops::rms_norm(o.data(), w.post_feedforward_norm.data(), rows, H, eps, add1, o.data());
  if (!per_layer) {
    ops::residual_add(hidden, o.data(), o.size(), w.layer_scalar);
    return;
  }
  ops::residual_add(hidden, o.data(), o.size());
  add_per_layer_input(c, w, per_layer, hidden, rows, rows_independent, cpu);
  if (w.layer_scalar != 1.f)
    for (size_t i = 0; i < size_t(rows) * H; ++i) hidden[i] *= w.layer_scalar;
}

void Model::logits(const float* hidden, int rows, float* out, bool rows_independent, const CpuContext& cpu) const {
  const int H = config_.hidden_size, V = config_.vocab_size;
  AlignedVector<float> x(size_t(rows) * H);
  ops::rms_norm(hidden, weights_.final_norm.data(), rows, H, config_.rms_norm_eps, config_.norm_adds_one, x.data());
  linear(x.data(), rows, weights_.output_matrix(), out, rows_independent, cpu);
  if (config_.final_logit_softcap) ops::softcap(out, size_t(rows) * size_t(V), *config_.final_logit_softcap);
}

}  // namespace splitdec
