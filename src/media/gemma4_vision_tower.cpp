#include "media/gemma4_vision_tower.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "media/tower_ops.h"

namespace splitdec {

namespace {

using namespace tower;

const std::string kTower = "Gemma-4 vision encoder: ";

void check_inputs(const Gemma4VisionShape& s, const Gemma4VisionWeights& w, const ImagePatches& p) {
  if (s.pool <= 0) throw ConfigError(kTower + "pooling kernel " + std::to_string(s.pool) + " is not positive");
  if (p.rows <= 0 || p.cols <= 0)
    throw InputError(kTower + "the image has " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " patches (none)");
  if (p.rows % s.pool != 0 || p.cols % s.pool != 0)
    throw InputError(kTower + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " patches do not divide into " +
                     std::to_string(s.pool) + " x " + std::to_string(s.pool) + " pooling bins (each side must be a multiple of " +
                     std::to_string(s.pool) + ")");
  if (p.rows > s.positions || p.cols > s.positions)
    throw InputError(kTower + std::to_string(p.rows) + " x " + std::to_string(p.cols) +
                     " patches exceed the position table, which holds " + std::to_string(s.positions) + " positions per side");
  if (p.patch_dim != s.patch_dim())
    throw InputError(kTower + "patches of " + std::to_string(p.patch_dim) + " values, the model takes " +
                     std::to_string(s.patch_dim()) + " (" + std::to_string(s.patch) + " x " + std::to_string(s.patch) + " x 3)");
  const int64_t n = int64_t(p.rows) * p.cols;
  if (int64_t(p.data.size()) != n * p.patch_dim)
    throw InputError(kTower + "the patch buffer holds " + std::to_string(p.data.size()) + " values, " + std::to_string(p.rows) +
                     " x " + std::to_string(p.cols) + " patches of " + std::to_string(p.patch_dim) + " need " +
                     std::to_string(n * p.patch_dim));

  const int H = s.hidden, I = s.intermediate, hd = s.head_dim;
  // The 2-D RoPE splits head_dim into two rotate_half halves: a multiple of 4.
  if (H <= 0 || I <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0 || hd <= 0 || hd % 4 != 0)
    throw ConfigError(kTower + "unsupported attention shape: " + std::to_string(s.heads) + " heads, " +
                      std::to_string(s.kv_heads) + " kv heads, head_dim " + std::to_string(hd) +
                      " (kv heads must divide heads, head_dim a multiple of 4)");
  const int qw = s.heads * hd, kw = s.kv_heads * hd;
  expect_matrix(w.input_proj, H, s.patch_dim(), kTower + "input_proj");
  expect_values(w.position_table, int64_t(2) * s.positions * H, kTower + "position_embedding_table");
  if (int(w.layers.size()) != s.layers)
    throw ConfigError(kTower + std::to_string(w.layers.size()) + " layers of weights, the shape has " + std::to_string(s.layers));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Gemma4VisionLayerWeights& l = w.layers[i];
    const std::string at = kTower + "layer " + std::to_string(i) + " ";
    expect_matrix(l.q_proj.weight, qw, H, at + "q_proj");
    expect_matrix(l.k_proj.weight, kw, H, at + "k_proj");
    expect_matrix(l.v_proj.weight, kw, H, at + "v_proj");
    expect_matrix(l.o_proj.weight, H, qw, at + "o_proj");
    expect_matrix(l.gate_proj.weight, I, H, at + "gate_proj");
    expect_matrix(l.up_proj.weight, I, H, at + "up_proj");
    expect_matrix(l.down_proj.weight, H, I, at + "down_proj");
    expect_values(l.q_norm, hd, at + "q_norm");
    expect_values(l.k_norm, hd, at + "k_norm");
    for (const std::vector<float>* v : {&l.input_norm, &l.post_attention_norm, &l.pre_feedforward_norm, &l.post_feedforward_norm})
      expect_values(*v, H, at + "layer norm");
  }
  if (s.standardize) {
    expect_values(w.std_bias, H, kTower + "std_bias");
    expect_values(w.std_scale, H, kTower + "std_scale");
  }
  expect_matrix(w.embedding_projection, projection_width(w.embedding_projection, s.text_hidden), H,
                kTower + "embedding_projection");
}

// cos / sin of position * inv_freq[k] for every position 0..max side, k <
// head_dim / 4: one table serves both axes.
struct RopeTable {
  int quarter = 0;
  std::vector<float> cos, sin;  // [positions, quarter]

  RopeTable(int positions, int head_dim, double theta) : quarter(head_dim / 4) {
    const int spatial = head_dim / 2;  // each axis rotates half of the head with its own frequencies
    cos.resize(size_t(positions) * quarter), sin.resize(size_t(positions) * quarter);
    for (int k = 0; k < quarter; ++k) {
      const float inv_freq = float(1.0 / std::pow(theta, double(2 * k) / spatial));
      for (int p = 0; p < positions; ++p) {
        const float angle = inv_freq * float(p);  // HF forms the angle in f32
        cos[size_t(p) * quarter + k] = float(std::cos(double(angle)));
        sin[size_t(p) * quarter + k] = float(std::sin(double(angle)));
      }
    }
  }

  // rotate_half over `part` (2 * quarter values) by position p.
  void rotate(float* part, int p) const {
    const float* c = cos.data() + size_t(p) * quarter;
    const float* s = sin.data() + size_t(p) * quarter;
    for (int k = 0; k < quarter; ++k) {
      const float a = part[k], b = part[k + quarter];
      part[k] = a * c[k] - b * s[k];
      part[k + quarter] = b * c[k] + a * s[k];
    }
  }
};

// Per token: RMSNorm of each head (weight w, or none for v), then the 2-D
// RoPE when `rope` is given: first half of the head by x (column), second half
// by y (row).
void norm_heads(float* x, int tokens, int cols, int heads, int hd, const float* w, float eps, const RopeTable* rope) {
  for_rows(tokens, int64_t(heads) * hd, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* row = x + t * int64_t(heads) * hd;
      ops::rms_norm(row, w, heads, hd, eps, false, row);
      if (!rope) continue;
      const int px = int(t % cols), py = int(t / cols);
      for (int h = 0; h < heads; ++h) {
        rope->rotate(row + int64_t(h) * hd, px);
        rope->rotate(row + int64_t(h) * hd + hd / 2, py);
      }
    }
  });
}

}  // namespace

MediaEmbeddings gemma4_vision_encode(const Gemma4VisionShape& s, const Gemma4VisionWeights& w, const ImagePatches& p,
                                     const LayerProgress& progress) {
  check_inputs(s, w, p);
  const int rows = p.rows, cols = p.cols, N = rows * cols, H = s.hidden, I = s.intermediate;
  const int heads = s.heads, kvh = s.kv_heads, hd = s.head_dim, qw = heads * hd, kw = kvh * hd;
  const float eps = s.rms_norm_eps;
  const size_t n = size_t(N);

  // Buffers for the whole call. `scratch` takes the rescaled pixels, then
  // each clipped linear's clamped input.
  std::vector<float> h(n * H), a(n * H), q(n * qw), kv(n * kw), k(n * kw), v(n * kw), attn(n * qw), o(n * H);
  std::vector<float> gate(n * I), up(n * I), scratch(n * size_t(std::max({p.patch_dim, H, qw, I})));
  const FullAttention attention(N);
  const RopeTable rope(std::max(rows, cols), hd, s.rope_theta);

  // 2 (x - 0.5) -> input_proj, + table[0][x] + table[1][y].
  for_rows(N, p.patch_dim, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0) * p.patch_dim; i < size_t(r1) * p.patch_dim; ++i) scratch[i] = 2.f * (p.data[i] - 0.5f);
  });
  linear(scratch.data(), N, w.input_proj, h.data());
  const float* table_x = w.position_table.data();
  const float* table_y = table_x + size_t(s.positions) * H;
  for_rows(N, H, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* px = table_x + size_t(t % cols) * H;
      const float* py = table_y + size_t(t / cols) * H;
      float* hr = h.data() + size_t(t) * H;
      for (int i = 0; i < H; ++i) hr[i] += px[i] + py[i];
    }
  });

  for (size_t li = 0; li < w.layers.size(); ++li) {
    const Gemma4VisionLayerWeights& l = w.layers[li];
    if (progress) progress(int(li), int(w.layers.size()));
    // x += post_attention_norm(o_proj(attn(input_norm(x))))
    rms_norm_rows(h.data(), l.input_norm.data(), N, H, eps, false, a.data());
    clipped_linear(l.q_proj, a.data(), N, scratch.data(), q.data());
    norm_heads(q.data(), N, cols, heads, hd, l.q_norm.data(), eps, &rope);
    clipped_linear(l.k_proj, a.data(), N, scratch.data(), kv.data());
    norm_heads(kv.data(), N, cols, kvh, hd, l.k_norm.data(), eps, &rope);
    to_heads_major(kv.data(), nullptr, N, kvh, hd, k.data());
    clipped_linear(l.v_proj, a.data(), N, scratch.data(), kv.data());
    norm_heads(kv.data(), N, cols, kvh, hd, nullptr, eps, nullptr);
    to_heads_major(kv.data(), nullptr, N, kvh, hd, v.data());
    attention.run(q.data(), heads, kvh, hd, 1.f, k.data(), v.data(), attn.data());
    clipped_linear(l.o_proj, attn.data(), N, scratch.data(), o.data());
    rms_norm_rows(o.data(), l.post_attention_norm.data(), N, H, eps, false, o.data());
    add_residual_rows(h.data(), o.data(), nullptr, N, H);

    // x += post_feedforward_norm(down(gelu_tanh(gate(y)) * up(y))), y = pre_feedforward_norm(x)
    rms_norm_rows(h.data(), l.pre_feedforward_norm.data(), N, H, eps, false, a.data());
    clipped_linear(l.gate_proj, a.data(), N, scratch.data(), gate.data());
    clipped_linear(l.up_proj, a.data(), N, scratch.data(), up.data());
    gelu_tanh_gate_rows(gate.data(), up.data(), N, I);
    clipped_linear(l.down_proj, gate.data(), N, scratch.data(), o.data());
    rms_norm_rows(o.data(), l.post_feedforward_norm.data(), N, H, eps, false, o.data());
    add_residual_rows(h.data(), o.data(), nullptr, N, H);
  }
  if (progress) progress(int(w.layers.size()), int(w.layers.size()));

  // Pool by position, x sqrt(hidden), standardize, weightless RMSNorm, projection.
  const int T = (rows / s.pool) * (cols / s.pool);
  std::vector<float> pooled(size_t(T) * H);
  average_pool_grid(h.data(), rows, cols, H, s.pool, pooled.data());
  const float root = float(std::sqrt(double(H)));
  for_rows(T, H, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* r = pooled.data() + size_t(t) * H;
      for (int i = 0; i < H; ++i) r[i] *= root;
      if (s.standardize)
        for (int i = 0; i < H; ++i) r[i] = (r[i] - w.std_bias[size_t(i)]) * w.std_scale[size_t(i)];
    }
  });
  rms_norm_rows(pooled.data(), nullptr, T, H, eps, false, pooled.data());
  MediaEmbeddings result;
  result.rows = T;
  result.data.resize(size_t(T) * w.embedding_projection.out);
  linear(pooled.data(), T, w.embedding_projection, result.data.data());
  return result;
}

}  // namespace splitdec
