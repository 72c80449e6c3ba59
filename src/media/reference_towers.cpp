#include "media/reference_towers.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"

namespace splitdec {

namespace {

// A row-major [rows, cols] activation in float64.
struct Tensor {
  int rows = 0, cols = 0;
  std::vector<double> v;

  Tensor(int r, int c) : rows(r), cols(c), v(size_t(r) * size_t(c), 0.0) {}
  double* row(int r) { return v.data() + size_t(r) * size_t(cols); }
  const double* row(int r) const { return v.data() + size_t(r) * size_t(cols); }
};

Tensor from_floats(const std::vector<float>& x, int rows, int cols) {
  Tensor t(rows, cols);
  for (size_t i = 0; i < t.v.size(); ++i) t.v[i] = x[i];
  return t;
}

MediaEmbeddings to_embeddings(const Tensor& t) {
  MediaEmbeddings e;
  e.rows = t.rows;
  e.data.resize(t.v.size());
  for (size_t i = 0; i < t.v.size(); ++i) e.data[i] = float(t.v[i]);
  return e;
}

// nn.Linear without bias: y[r, o] = sum_i x[r, i] W[o, i].
Tensor linear(const Tensor& x, const WeightMatrix& w) {
  if (w.in != x.cols) throw ConfigError("reference tower: a [" + std::to_string(w.out) + ", " + std::to_string(w.in) +
                                        "] weight applied to rows of " + std::to_string(x.cols));
  Tensor y(x.rows, w.out);
  std::vector<float> wrow(size_t(w.in));
  for (int o = 0; o < w.out; ++o) {
    w.row_f32(o, wrow.data());
    for (int r = 0; r < x.rows; ++r) {
      const double* xr = x.row(r);
      double acc = 0;
      for (int i = 0; i < w.in; ++i) acc += xr[i] * double(wrow[size_t(i)]);
      y.row(r)[o] = acc;
    }
  }
  return y;
}

void add_bias(Tensor& x, const std::vector<float>& b) {
  for (int r = 0; r < x.rows; ++r)
    for (int c = 0; c < x.cols; ++c) x.row(r)[c] += b[size_t(c)];
}

void add(Tensor& x, const Tensor& y) {
  for (size_t i = 0; i < x.v.size(); ++i) x.v[i] += y.v[i];
}

// nn.LayerNorm: (x - mean) / sqrt(biased var + eps) * w + b, per row.
void layer_norm(Tensor& x, const std::vector<float>& w, const std::vector<float>& b, double eps) {
  for (int r = 0; r < x.rows; ++r) {
    double* xr = x.row(r);
    double mean = 0;
    for (int c = 0; c < x.cols; ++c) mean += xr[c];
    mean /= x.cols;
    double var = 0;
    for (int c = 0; c < x.cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= x.cols;
    for (int c = 0; c < x.cols; ++c) xr[c] = (xr[c] - mean) / std::sqrt(var + eps) * w[size_t(c)] + b[size_t(c)];
  }
}

// RMSNorm over `width`-wide groups of each row (a whole row, or each head):
// x * (mean(x^2) + eps)^-0.5 * scale, scale = 1 + w (Gemma-3), w (Gemma-4)
// or 1 (no weight).
void rms_norm(Tensor& x, int width, const float* w, bool adds_one, double eps) {
  for (int r = 0; r < x.rows; ++r)
    for (int g = 0; g < x.cols / width; ++g) {
      double* xs = x.row(r) + size_t(g) * width;
      double ms = 0;
      for (int c = 0; c < width; ++c) ms += xs[c] * xs[c];
      ms /= width;
      const double inv = std::pow(ms + eps, -0.5);
      for (int c = 0; c < width; ++c) {
        const double scale = w == nullptr ? 1.0 : adds_one ? 1.0 + double(w[c]) : double(w[c]);
        xs[c] = xs[c] * inv * scale;
      }
    }
}

double gelu_tanh(double x) {
  const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

// Scaled dot-product attention with no mask: q [N, heads * hd], k / v [N,
// kv_heads * hd]; query head h reads KV head h / (heads / kv_heads)
// (repeat_kv). Explicit softmax over all N keys.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int kv_heads, int hd, double scale) {
  const int N = q.rows, rep = heads / kv_heads;
  Tensor out(N, heads * hd);
  std::vector<double> p(static_cast<size_t>(N));
  for (int h = 0; h < heads; ++h) {
    const int kh = h / rep;
    for (int i = 0; i < N; ++i) {
      const double* qi = q.row(i) + size_t(h) * hd;
      double mx = -INFINITY;
      for (int j = 0; j < N; ++j) {
        const double* kj = k.row(j) + size_t(kh) * hd;
        double s = 0;
        for (int d = 0; d < hd; ++d) s += qi[d] * kj[d];
        p[size_t(j)] = s * scale;
        mx = std::max(mx, p[size_t(j)]);
      }
      double sum = 0;
      for (int j = 0; j < N; ++j) sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      double* oi = out.row(i) + size_t(h) * hd;
      for (int j = 0; j < N; ++j) {
        const double* vj = v.row(j) + size_t(kh) * hd;
        for (int d = 0; d < hd; ++d) oi[d] += p[size_t(j)] / sum * vj[d];
      }
    }
  }
  return out;
}

void require_patches(const std::string& tower, const ImagePatches& p, int patch_dim) {
  if (p.rows <= 0 || p.cols <= 0) throw InputError(tower + ": no patches");
  if (p.patch_dim != patch_dim)
    throw InputError(tower + ": patches of " + std::to_string(p.patch_dim) + " values, the model takes " + std::to_string(patch_dim));
  if (p.data.size() != size_t(p.rows) * size_t(p.cols) * size_t(p.patch_dim))
    throw InputError(tower + ": the patch buffer does not hold rows x cols x patch_dim values");
}

// ---- Gemma-4 helpers -------------------------------------------------------

// Gemma4ClippableLinear: clamp the input, matmul, clamp the output.
Tensor clipped_linear(const Tensor& x, const ClippedLinear& c) {
  if (!c.clip) return linear(x, c.weight);
  Tensor in = x;
  for (double& e : in.v) e = std::clamp(e, double(c.clip->input_min), double(c.clip->input_max));
  Tensor y = linear(in, c.weight);
  for (double& e : y.v) e = std::clamp(e, double(c.clip->output_min), double(c.clip->output_max));
  return y;
}

// apply_multidimensional_rope for one head: the head splits into two parts of
// hd / 2; part 0 rotates by the x position, part 1 by the y position, each as
// x * cos + rotate_half(x) * sin with cos / sin over cat(freqs, freqs),
// freqs[j] = pos * inv_freq[j], inv_freq[j] = 1 / theta^(2j / (hd / 2)).
void rope_2d(double* head, int hd, int x_pos, int y_pos, double theta) {
  const int part = hd / 2, quarter = part / 2;
  for (int axis = 0; axis < 2; ++axis) {
    double* xs = head + size_t(axis) * part;
    const double pos = axis == 0 ? x_pos : y_pos;
    std::vector<double> rotated(static_cast<size_t>(part)), out(static_cast<size_t>(part));
    for (int j = 0; j < part; ++j) rotated[size_t(j)] = j < quarter ? -xs[j + quarter] : xs[j - quarter];
    for (int j = 0; j < part; ++j) {
      const double inv_freq = 1.0 / std::pow(theta, double(2 * (j % quarter)) / part);
      const double angle = pos * inv_freq;
      out[size_t(j)] = xs[j] * std::cos(angle) + rotated[size_t(j)] * std::sin(angle);
    }
    std::copy(out.begin(), out.end(), xs);
  }
}

}  // namespace

MediaEmbeddings reference_siglip(const SiglipShape& s, const SiglipWeights& w, const ImagePatches& p) {
  const int G = s.patch > 0 ? s.image_size / s.patch : 0;
  if (G <= 0 || s.pool <= 0 || G % s.pool != 0) throw InputError("reference SigLIP: the grid does not divide into pooling blocks");
  if (p.rows != G || p.cols != G) throw InputError("reference SigLIP: the patch grid differs from the model's");
  require_patches("reference SigLIP", p, 3 * s.patch * s.patch);
  const int N = G * G, H = s.hidden, heads = s.heads, hd = s.head_dim;
  const double eps = s.layer_norm_eps;

  // Conv2d(k = s = patch) over (c, ky, kx)-flattened patches = a linear; + bias + position_embedding(arange(N)).
  Tensor h = linear(from_floats(p.data, N, p.patch_dim), w.patch_embedding);
  add_bias(h, w.patch_bias);
  add(h, from_floats(w.position_embedding, N, H));

  for (const SiglipLayerWeights& l : w.layers) {
    Tensor a = h;
    layer_norm(a, l.ln1_weight, l.ln1_bias, eps);
    Tensor q = linear(a, l.q_proj), k = linear(a, l.k_proj), v = linear(a, l.v_proj);
    add_bias(q, l.q_bias), add_bias(k, l.k_bias), add_bias(v, l.v_bias);
    Tensor o = linear(attention(q, k, v, heads, heads, hd, 1.0 / std::sqrt(double(hd))), l.out_proj);
    add_bias(o, l.out_bias);
    add(h, o);

    Tensor b = h;
    layer_norm(b, l.ln2_weight, l.ln2_bias, eps);
    Tensor f = linear(b, l.fc1);
    add_bias(f, l.fc1_bias);
    for (double& e : f.v) e = gelu_tanh(e);
    Tensor g = linear(f, l.fc2);
    add_bias(g, l.fc2_bias);
    add(h, g);
  }
  layer_norm(h, w.post_ln_weight, w.post_ln_bias, eps);

  // Gemma3MultiModalProjector: [N, H] -> image [H, G, G] -> AvgPool2d(pool) -> flatten row-major.
  const int PG = G / s.pool;
  Tensor pooled(PG * PG, H);
  for (int c = 0; c < H; ++c)
    for (int oy = 0; oy < PG; ++oy)
      for (int ox = 0; ox < PG; ++ox) {
        double sum = 0;
        for (int y = oy * s.pool; y < (oy + 1) * s.pool; ++y)
          for (int x = ox * s.pool; x < (ox + 1) * s.pool; ++x) sum += h.row(y * G + x)[c];
        pooled.row(oy * PG + ox)[c] = sum / (s.pool * s.pool);
      }
  rms_norm(pooled, H, w.soft_emb_norm.data(), true, eps);
  return to_embeddings(linear(pooled, w.projection));
}

MediaEmbeddings reference_gemma4_vision(const Gemma4VisionShape& s, const Gemma4VisionWeights& w, const ImagePatches& p) {
  require_patches("reference Gemma-4 vision", p, 3 * s.patch * s.patch);
  if (s.pool <= 0 || p.rows % s.pool != 0 || p.cols % s.pool != 0)
    throw InputError("reference Gemma-4 vision: the patch grid does not divide into pooling bins");
  if (p.rows > s.positions || p.cols > s.positions) throw InputError("reference Gemma-4 vision: the grid exceeds the position table");
  const int rows = p.rows, cols = p.cols, N = rows * cols, H = s.hidden, hd = s.head_dim;
  const double eps = s.rms_norm_eps;
  // pixel_position_ids: (x, y) = (column, row) of each patch in row-major order.
  auto x_of = [&](int t) { return t % cols; };
  auto y_of = [&](int t) { return t / cols; };

  // Gemma4VisionPatchEmbedder: input_proj(2 (x - 0.5)) + table[0][x] + table[1][y].
  Tensor pixels = from_floats(p.data, N, p.patch_dim);
  for (double& e : pixels.v) e = 2.0 * (e - 0.5);
  Tensor h = linear(pixels, w.input_proj);
  for (int t = 0; t < N; ++t)
    for (int c = 0; c < H; ++c)
      h.row(t)[c] += double(w.position_table[(size_t(0) * s.positions + x_of(t)) * H + c]) +
                     double(w.position_table[(size_t(1) * s.positions + y_of(t)) * H + c]);

  for (const Gemma4VisionLayerWeights& l : w.layers) {
    Tensor a = h;
    rms_norm(a, H, l.input_norm.data(), false, eps);
    Tensor q = clipped_linear(a, l.q_proj), k = clipped_linear(a, l.k_proj), v = clipped_linear(a, l.v_proj);
    rms_norm(q, hd, l.q_norm.data(), false, eps);
    rms_norm(k, hd, l.k_norm.data(), false, eps);
    rms_norm(v, hd, nullptr, false, eps);
    for (int t = 0; t < N; ++t) {
      for (int hh = 0; hh < s.heads; ++hh) rope_2d(q.row(t) + size_t(hh) * hd, hd, x_of(t), y_of(t), s.rope_theta);
      for (int hh = 0; hh < s.kv_heads; ++hh) rope_2d(k.row(t) + size_t(hh) * hd, hd, x_of(t), y_of(t), s.rope_theta);
    }
    Tensor o = clipped_linear(attention(q, k, v, s.heads, s.kv_heads, hd, 1.0), l.o_proj);
    rms_norm(o, H, l.post_attention_norm.data(), false, eps);
    add(h, o);

    Tensor b = h;
    rms_norm(b, H, l.pre_feedforward_norm.data(), false, eps);
    Tensor gate = clipped_linear(b, l.gate_proj);
    const Tensor up = clipped_linear(b, l.up_proj);
    for (size_t i = 0; i < gate.v.size(); ++i) gate.v[i] = gelu_tanh(gate.v[i]) * up.v[i];
    Tensor d = clipped_linear(gate, l.down_proj);
    rms_norm(d, H, l.post_feedforward_norm.data(), false, eps);
    add(h, d);
  }

  // Gemma4VisionPooler._avg_pool_by_positions: bin = x / k + (max_x / k) * (y / k), each patch
  // adding 1 / k^2 of itself to its bin; then x sqrt(hidden).
  const int k = s.pool, max_x = cols, T = (rows / k) * (cols / k);
  Tensor pooled(T, H);
  for (int t = 0; t < N; ++t) {
    const int bin = x_of(t) / k + (max_x / k) * (y_of(t) / k);
    for (int c = 0; c < H; ++c) pooled.row(bin)[c] += h.row(t)[c] / double(k * k);
  }
  for (double& e : pooled.v) e *= std::sqrt(double(H));
  if (s.standardize)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < H; ++c)
        pooled.row(t)[c] = (pooled.row(t)[c] - double(w.std_bias[size_t(c)])) * double(w.std_scale[size_t(c)]);
  // embed_vision: RMSNorm without weight -> Linear.
  rms_norm(pooled, H, nullptr, false, eps);
  return to_embeddings(linear(pooled, w.embedding_projection));
}

MediaEmbeddings reference_unified_image(const UnifiedVisionShape& s, const UnifiedVisionWeights& w, const ImagePatches& p) {
  require_patches("reference unified image", p, 3 * s.patch * s.patch);
  if (p.rows > s.positions || p.cols > s.positions) throw InputError("reference unified image: the grid exceeds the position table");
  const int N = p.rows * p.cols, D = s.embed_dim;

  Tensor h = from_floats(p.data, N, p.patch_dim);
  layer_norm(h, w.ln1_weight, w.ln1_bias, s.layer_norm_eps);
  Tensor e = linear(h, w.dense);
  add_bias(e, w.dense_bias);
  layer_norm(e, w.ln2_weight, w.ln2_bias, s.layer_norm_eps);
  // pos_embedding[position, axis]: axis 0 indexed by x (column), axis 1 by y (row).
  for (int t = 0; t < N; ++t) {
    const int x = t % p.cols, y = t / p.cols;
    for (int c = 0; c < D; ++c)
      e.row(t)[c] += double(w.pos_embedding[(size_t(x) * 2 + 0) * D + c]) + double(w.pos_embedding[(size_t(y) * 2 + 1) * D + c]);
  }
  layer_norm(e, w.pos_norm_weight, w.pos_norm_bias, s.layer_norm_eps);
  rms_norm(e, D, nullptr, false, s.rms_norm_eps);
  return to_embeddings(linear(e, w.projection));
}

MediaEmbeddings reference_unified_audio(const UnifiedAudioShape& s, const WeightMatrix& projection, const AudioClip& clip) {
  if (clip.samples.empty()) throw InputError("reference unified audio: empty clip");
  if (clip.sample_rate != kAudioSampleRate) throw InputError("reference unified audio: not 16 kHz");
  if (s.frame <= 0) throw ConfigError("reference unified audio: frame is not positive");
  const int frames = int((clip.samples.size() + size_t(s.frame) - 1) / size_t(s.frame));
  Tensor x(frames, s.frame);  // zeros: the last frame's padding
  for (size_t i = 0; i < clip.samples.size(); ++i) x.v[i] = clip.samples[i];
  rms_norm(x, s.frame, nullptr, false, s.rms_norm_eps);
  return to_embeddings(linear(x, projection));
}

}  // namespace splitdec
