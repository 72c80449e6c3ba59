#include "media/siglip_tower.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear.h"
#include "media/tower_ops.h"

namespace splitdec {

namespace {

using namespace tower;

// Shapes the caller controls (the patches) are InputErrors; a model whose
// shape or weights disagree with themselves is a ConfigError.
void check_inputs(const SiglipShape& s, const SiglipWeights& w, const ImagePatches& p) {
  const std::string tower = "SigLIP tower: ";
  if (s.patch <= 0 || s.image_size < s.patch || s.pool <= 0 || s.grid() % s.pool != 0)
    throw InputError(tower + "a grid of " + std::to_string(s.grid()) + " x " + std::to_string(s.grid()) + " patches (" +
                     std::to_string(s.image_size) + " px / " + std::to_string(s.patch) + " px) does not divide into " +
                     std::to_string(s.pool) + " x " + std::to_string(s.pool) + " pooling blocks");
  if (p.rows != s.grid() || p.cols != s.grid())
    throw InputError(tower + "the image has " + std::to_string(p.rows) + " x " + std::to_string(p.cols) +
                     " patches, the model takes exactly " + std::to_string(s.grid()) + " x " + std::to_string(s.grid()));
  if (p.patch_dim != s.patch_dim())
    throw InputError(tower + "patches of " + std::to_string(p.patch_dim) + " values, the model takes " +
                     std::to_string(s.patch_dim()) + " (3 x " + std::to_string(s.patch) + " x " + std::to_string(s.patch) + ")");
  const int64_t n = int64_t(p.rows) * p.cols;
  if (int64_t(p.data.size()) != n * p.patch_dim)
    throw InputError(tower + "the patch buffer holds " + std::to_string(p.data.size()) + " values, " +
                     std::to_string(p.rows) + " x " + std::to_string(p.cols) + " patches of " + std::to_string(p.patch_dim) +
                     " need " + std::to_string(n * p.patch_dim));

  const int H = s.hidden, I = s.intermediate;
  if (H <= 0 || I <= 0 || s.heads <= 0 || s.head_dim <= 0 || s.heads * s.head_dim != H)
    throw ConfigError(tower + std::to_string(s.heads) + " heads of " + std::to_string(s.head_dim) +
                      " do not make the hidden size " + std::to_string(H));
  expect_matrix(w.patch_embedding, H, s.patch_dim(), tower + "patch_embedding");
  expect_values(w.patch_bias, H, tower + "patch_embedding bias");
  expect_values(w.position_embedding, n * H, tower + "position_embedding");
  if (int(w.layers.size()) != s.layers)
    throw ConfigError(tower + std::to_string(w.layers.size()) + " layers of weights, the shape has " + std::to_string(s.layers));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const SiglipLayerWeights& l = w.layers[i];
    const std::string at = tower + "layer " + std::to_string(i) + " ";
    for (const std::vector<float>* v : {&l.ln1_weight, &l.ln1_bias, &l.ln2_weight, &l.ln2_bias, &l.q_bias, &l.k_bias, &l.v_bias,
                                        &l.out_bias, &l.fc2_bias})
      expect_values(*v, H, at + "norm/bias vector");
    expect_values(l.fc1_bias, I, at + "fc1 bias");
    expect_matrix(l.q_proj, H, H, at + "q_proj");
    expect_matrix(l.k_proj, H, H, at + "k_proj");
    expect_matrix(l.v_proj, H, H, at + "v_proj");
    expect_matrix(l.out_proj, H, H, at + "out_proj");
    expect_matrix(l.fc1, I, H, at + "fc1");
    expect_matrix(l.fc2, H, I, at + "fc2");
  }
  expect_values(w.post_ln_weight, H, tower + "post_layernorm weight");
  expect_values(w.post_ln_bias, H, tower + "post_layernorm bias");
  expect_values(w.soft_emb_norm, H, tower + "mm_soft_emb_norm");
  expect_matrix(w.projection, projection_width(w.projection, s.text_hidden), H, tower + "mm_input_projection");
}

}  // namespace

MediaEmbeddings siglip_encode(const SiglipShape& s, const SiglipWeights& w, const ImagePatches& p, const LayerProgress& progress) {
  check_inputs(s, w, p);
  const int G = s.grid(), N = G * G, H = s.hidden, I = s.intermediate, heads = s.heads, hd = s.head_dim;
  const float eps = s.layer_norm_eps;
  const size_t NH = size_t(N) * H;

  // Buffers for the whole call, reused by every layer.
  std::vector<float> h(NH), a(NH), q(NH), kv(NH), k(NH), v(NH), attn(NH), f(size_t(N) * I);
  const FullAttention attention(N);
  const float scale = float(1.0 / std::sqrt(double(hd)));

  // The patch Conv2d as one GEMM, + its bias and the learned positions.
  linear(p.data.data(), N, w.patch_embedding, h.data());
  for_rows(N, H, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int i = 0; i < H; ++i) h[size_t(r) * H + i] += w.patch_bias[size_t(i)] + w.position_embedding[size_t(r) * H + i];
  });

  for (size_t li = 0; li < w.layers.size(); ++li) {
    const SiglipLayerWeights& l = w.layers[li];
    if (progress) progress(int(li), int(w.layers.size()));
    // x += out_proj(MHA(LN1(x)))
    layer_norm_rows(h.data(), l.ln1_weight.data(), l.ln1_bias.data(), N, H, eps, a.data());
    linear(a.data(), N, l.q_proj, q.data());
    add_bias_rows(q.data(), l.q_bias.data(), N, H);
    linear(a.data(), N, l.k_proj, kv.data());
    to_heads_major(kv.data(), l.k_bias.data(), N, heads, hd, k.data());
    linear(a.data(), N, l.v_proj, kv.data());
    to_heads_major(kv.data(), l.v_bias.data(), N, heads, hd, v.data());
    attention.run(q.data(), heads, heads, hd, scale, k.data(), v.data(), attn.data());
    linear(attn.data(), N, l.out_proj, a.data());
    add_residual_rows(h.data(), a.data(), l.out_bias.data(), N, H);

    // x += fc2(gelu_tanh(fc1(LN2(x))))
    layer_norm_rows(h.data(), l.ln2_weight.data(), l.ln2_bias.data(), N, H, eps, a.data());
    linear(a.data(), N, l.fc1, f.data());
    gelu_tanh_bias_rows(f.data(), l.fc1_bias.data(), N, I);
    linear(f.data(), N, l.fc2, a.data());
    add_residual_rows(h.data(), a.data(), l.fc2_bias.data(), N, H);
  }
  if (progress) progress(int(w.layers.size()), int(w.layers.size()));
  layer_norm_rows(h.data(), w.post_ln_weight.data(), w.post_ln_bias.data(), N, H, eps, a.data());

  // Projector: pool x pool average over the grid, RMSNorm (1 + w), x @ W.
  const int T = s.tokens(), out = w.projection.out;
  std::vector<float> pooled(size_t(T) * H);
  average_pool_grid(a.data(), G, G, H, s.pool, pooled.data());
  rms_norm_rows(pooled.data(), w.soft_emb_norm.data(), T, H, eps, w.soft_emb_norm_adds_one, pooled.data());
  MediaEmbeddings result;
  result.rows = T;
  result.data.resize(size_t(T) * out);
  linear(pooled.data(), T, w.projection, result.data.data());
  return result;
}

}  // namespace splitdec
