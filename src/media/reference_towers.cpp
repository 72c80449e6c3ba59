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
  rms_norm(pooled, H, w.soft_emb_norm.data(), w.soft_emb_norm_adds_one, eps);
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

// ---- Gemma-4 conformer audio (HF Gemma4AudioFeatureExtractor + Gemma4AudioModel) ----

namespace {

// The feature extractor on HF's padded clip: samples padded with zeros to a
// multiple of 128, 160 zeros prepended, frames of 321 samples every 160 (the
// last sample only decides validity), periodic Hann window in f32, a plain
// DFT of 512 points, |X|, HTK mel triangles, log(mel + 0.001). Returns every
// frame of the padded clip; mask[i]: frame i is real audio.
Tensor reference_log_mel_padded(const std::vector<float>& samples, std::vector<bool>& mask) {
  const int frame = 320, hop = 160, nfft = 512, freqs = nfft / 2 + 1, bins = 128, pad_left = frame / 2;
  const size_t padded = (samples.size() + 127) / 128 * 128;
  std::vector<double> wave(size_t(pad_left) + padded, 0.0);
  std::vector<bool> real(wave.size(), false);
  for (size_t i = 0; i < samples.size(); ++i) wave[size_t(pad_left) + i] = samples[i], real[size_t(pad_left) + i] = true;
  // _unfold: (length - 321) // 160 + 1 windows, none when the clip is shorter than one.
  const int64_t length = int64_t(wave.size());
  const int frames = length < frame + 1 ? 0 : int((length - (frame + 1)) / hop + 1);

  // mel_filter_bank(257, 128, 0, 8000, 16000, norm=None, mel_scale="htk").
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  auto to_hz = [](double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); };
  std::vector<double> edge(size_t(bins) + 2);
  for (int i = 0; i < bins + 2; ++i) edge[size_t(i)] = to_hz(to_mel(0.0) + (to_mel(8000.0) - to_mel(0.0)) * i / (bins + 1));
  std::vector<double> fb(size_t(freqs) * bins);
  for (int k = 0; k < freqs; ++k) {
    const double hz = 8000.0 * k / (freqs - 1);
    for (int j = 0; j < bins; ++j) {
      const double down = -(edge[size_t(j)] - hz) / (edge[size_t(j) + 1] - edge[size_t(j)]);
      const double up = (edge[size_t(j) + 2] - hz) / (edge[size_t(j) + 2] - edge[size_t(j) + 1]);
      fb[size_t(k) * bins + j] = std::max(0.0, std::min(down, up));
    }
  }
  Tensor out(frames, bins);
  mask.assign(size_t(frames), false);
  std::vector<double> x(static_cast<size_t>(frame)), mag(static_cast<size_t>(freqs));
  for (int f = 0; f < frames; ++f) {
    const size_t start = size_t(f) * hop;
    for (int n = 0; n < frame; ++n) {
      const float w = float(0.5 - 0.5 * std::cos(2 * std::numbers::pi * n / frame));
      x[size_t(n)] = double(float(wave[start + size_t(n)]) * w);  // f32 frame x f32 window, as HF
    }
    for (int k = 0; k < freqs; ++k) {
      double re = 0, im = 0;
      for (int n = 0; n < frame; ++n) {
        const double a = -2 * std::numbers::pi * double((int64_t(k) * n) % nfft) / nfft;
        re += x[size_t(n)] * std::cos(a), im += x[size_t(n)] * std::sin(a);
      }
      mag[size_t(k)] = std::hypot(re, im);
    }
    for (int j = 0; j < bins; ++j) {
      double mel = 0;
      for (int k = 0; k < freqs; ++k) mel += mag[size_t(k)] * fb[size_t(k) * bins + j];
      out.row(f)[j] = std::log(mel + 1e-3);
    }
    mask[size_t(f)] = real[start + size_t(frame)];
  }
  return out;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

void clamp_all(Tensor& x, double limit) {
  for (double& e : x.v) e = std::clamp(e, -limit, limit);
}

// Conv2d(3x3, stride 2, pad 1, no bias) over x [T, F, cin] (channel last)
// with weight rows [cout][cin][3][3] -> LayerNorm over channels (no bias) -> ReLU.
Tensor subsample(const Tensor& x, int T, int F, int cin, const std::vector<float>& weight, int cout,
                 const std::vector<float>& norm, double eps, int& To, int& Fo) {
  To = (T + 2 - 3) / 2 + 1, Fo = (F + 2 - 3) / 2 + 1;
  Tensor y(To * Fo, cout);
  for (int t = 0; t < To; ++t)
    for (int f = 0; f < Fo; ++f) {
      double* yr = y.row(t * Fo + f);
      for (int co = 0; co < cout; ++co) {
        double acc = 0;
        for (int ci = 0; ci < cin; ++ci)
          for (int dt = 0; dt < 3; ++dt)
            for (int df = 0; df < 3; ++df) {
              const int st = 2 * t - 1 + dt, sf = 2 * f - 1 + df;
              if (st < 0 || st >= T || sf < 0 || sf >= F) continue;
              acc += double(weight[((size_t(co) * cin + ci) * 3 + dt) * 3 + df]) * x.row(st * F + sf)[ci];
            }
        yr[co] = acc;
      }
    }
  layer_norm(y, norm, std::vector<float>(size_t(cout), 0.f), eps);
  for (double& e : y.v) e = std::max(e, 0.0);
  return y;
}

std::vector<float> matrix_values(const WeightMatrix& w) {
  std::vector<float> v(size_t(w.out) * size_t(w.in));
  for (int o = 0; o < w.out; ++o) w.row_f32(o, v.data() + size_t(o) * size_t(w.in));
  return v;
}

// Gemma4AudioFeedForward.
void feed_forward(Tensor& x, const ConformerFeedForward& f, const ConformerAudioShape& s) {
  Tensor a = x;
  clamp_all(a, s.gradient_clipping);
  rms_norm(a, a.cols, f.pre_norm.data(), false, 1e-6);
  Tensor u = clipped_linear(a, f.up);
  for (double& e : u.v) e = silu(e);
  Tensor d = clipped_linear(u, f.down);
  clamp_all(d, s.gradient_clipping);
  rms_norm(d, d.cols, f.post_norm.data(), false, 1e-6);
  for (size_t i = 0; i < x.v.size(); ++i) x.v[i] += d.v[i] * double(s.residual_weight);
}

// Gemma4AudioAttention as HF computes it: queries cut into blocks of
// `chunk`, each block reading a context of chunk + context_left - 1 keys
// (zero-padded), the relative term through _rel_shift, the softcap, then
// the blocked sliding-window and padding mask filled with invalid_logit.
Tensor chunked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& relk,
                         const std::vector<bool>& valid, const ConformerAudioShape& s) {
  const int T = q.rows, H = s.hidden, heads = s.heads, hd = s.head_dim(), chunk = s.chunk;
  const int L = s.context_left - 1, C = chunk + L, P = relk.rows;
  const int blocks = (T + chunk - 1) / chunk;
  Tensor out(T, H);
  std::vector<double> bd_raw(size_t(chunk) * (C + 1)), logit(static_cast<size_t>(C));
  for (int h = 0; h < heads; ++h)
    for (int b = 0; b < blocks; ++b) {
      // matrix_bd for the block: [chunk, P], padded to C + 1 columns, flattened, cut to chunk * C.
      std::fill(bd_raw.begin(), bd_raw.end(), 0.0);
      for (int i = 0; i < chunk; ++i) {
        const int qt = b * chunk + i;
        for (int c = 0; c < P; ++c) {
          double acc = 0;
          if (qt < T)
            for (int d = 0; d < hd; ++d) acc += q.row(qt)[h * hd + d] * relk.row(c)[h * hd + d];
          bd_raw[size_t(i) * (C + 1) + c] = acc;
        }
      }
      for (int i = 0; i < chunk; ++i) {
        const int qt = b * chunk + i;
        double mx = -INFINITY;
        for (int j = 0; j < C; ++j) {
          const int p = b * chunk - L + j;  // the key this context slot holds
          double a = 0;
          if (qt < T && p >= 0 && p < T)
            for (int d = 0; d < hd; ++d) a += q.row(qt)[h * hd + d] * k.row(p)[h * hd + d];
          const double bd = bd_raw[size_t(i) * C + j];  // _rel_shift: flat index i * C + j
          double l = std::tanh((a + bd) / s.logit_cap) * s.logit_cap;
          // HF's 4-D mask: key valid, 0 <= q - p < context_left - 1 (context_right 0).
          const bool allowed = qt < T && p >= 0 && p < T && valid[size_t(p)] && qt - p >= 0 && qt - p < L;
          if (!allowed) l = s.invalid_logit;
          logit[size_t(j)] = l;
          mx = std::max(mx, l);
        }
        double sum = 0;
        for (int j = 0; j < C; ++j) sum += (logit[size_t(j)] = std::exp(logit[size_t(j)] - mx));
        if (qt >= T) continue;
        for (int j = 0; j < C; ++j) {
          const int p = b * chunk - L + j;
          if (p < 0 || p >= T) continue;  // zero padding
          for (int d = 0; d < hd; ++d) out.row(qt)[h * hd + d] += logit[size_t(j)] / sum * v.row(p)[h * hd + d];
        }
      }
    }
  return out;
}

}  // namespace

MediaEmbeddings reference_log_mel(const std::vector<float>& samples) {
  std::vector<bool> mask;
  const Tensor all = reference_log_mel_padded(samples, mask);
  int valid = 0;
  while (valid < all.rows && mask[size_t(valid)]) ++valid;
  Tensor out(valid, all.cols);
  std::copy(all.v.begin(), all.v.begin() + std::ptrdiff_t(out.v.size()), out.v.begin());
  return to_embeddings(out);
}

MediaEmbeddings reference_conformer_audio(const ConformerAudioShape& s, const ConformerAudioWeights& w, const AudioClip& clip) {
  if (clip.sample_rate != kAudioSampleRate) throw InputError("reference conformer audio: not 16 kHz");
  check_conformer_weights(s, w);
  if (s.features.bins != 128 || s.features.frame_length != 320 || s.features.hop != 160 || s.features.fft != 512)
    throw ConfigError("reference conformer audio: only HF's default features (128 bins, 320 / 160 / 512) are modelled");
  std::vector<bool> mask;
  Tensor feat = reference_log_mel_padded(clip.samples, mask);
  if (feat.rows == 0 || !mask[0]) throw InputError("reference conformer audio: the clip is shorter than one mel frame");
  const int H = s.hidden, F = 128;

  // The extractor zeroes invalid frames; each subsampling layer masks its input by time, then mask = mask[::2].
  auto apply_mask = [](Tensor& x, int T, int F_, const std::vector<bool>& m) {
    for (int t = 0; t < T; ++t)
      if (!m[size_t(t)])
        for (int f = 0; f < F_; ++f) std::fill(x.row(t * F_ + f), x.row(t * F_ + f) + x.cols, 0.0);
  };
  auto halve = [](const std::vector<bool>& m) {
    std::vector<bool> h;
    for (size_t i = 0; i < m.size(); i += 2) h.push_back(m[i]);
    return h;
  };
  int T = feat.rows, T0 = 0, F0 = 0, T1 = 0, F1 = 0;
  Tensor x0(T * F, 1);
  for (int t = 0; t < T; ++t)
    for (int f = 0; f < F; ++f) x0.row(t * F + f)[0] = mask[size_t(t)] ? feat.row(t)[f] : 0.0;
  apply_mask(x0, T, F, mask);
  Tensor l0 = subsample(x0, T, F, 1, w.conv0, s.channels0, w.norm0, s.rms_norm_eps, T0, F0);
  std::vector<bool> m0 = halve(mask);
  apply_mask(l0, T0, F0, m0);
  Tensor l1 = subsample(l0, T0, F0, s.channels0, matrix_values(w.conv1), s.channels1, w.norm1, s.rms_norm_eps, T1, F1);
  const std::vector<bool> valid = halve(m0);
  // permute(0, 2, 3, 1).reshape: each time row is [F1][c1].
  Tensor flat(T1, F1 * s.channels1);
  for (int t = 0; t < T1; ++t)
    for (int f = 0; f < F1; ++f)
      for (int c = 0; c < s.channels1; ++c) flat.row(t)[f * s.channels1 + c] = l1.row(t * F1 + f)[c];
  Tensor x = linear(flat, w.input_proj);

  // Gemma4AudioRelPositionalEncoding: positions context_size / 2 .. 0, [sin, cos].
  const int C = s.chunk + s.context_left - 1, P = C / 2 + 1, half = H / 2;
  Tensor pos(P, H);
  for (int r = 0; r < P; ++r)
    for (int i = 0; i < half; ++i) {
      const double inv = std::exp(double(i) * -(std::log(10000.0) / std::max(half - 1, 1)));
      pos.row(r)[i] = std::sin(double(C / 2 - r) * inv);
      pos.row(r)[half + i] = std::cos(double(C / 2 - r) * inv);
    }

  const int hd = s.head_dim();
  for (const ConformerLayerWeights& l : w.layers) {
    feed_forward(x, l.ffn1, s);
    Tensor a = x;
    clamp_all(a, s.gradient_clipping);
    rms_norm(a, H, l.norm_pre_attn.data(), false, 1e-6);
    Tensor q = clipped_linear(a, l.q_proj), k = clipped_linear(a, l.k_proj), v = clipped_linear(a, l.v_proj);
    for (int t = 0; t < T1; ++t)
      for (int i = 0; i < H; ++i) {
        const double softplus = std::log1p(std::exp(double(l.per_dim_scale[size_t(i % hd)])));
        q.row(t)[i] *= std::pow(double(hd), -0.5) / std::log(2.0) * softplus;
        k.row(t)[i] *= std::log(1.0 + std::numbers::e) / std::log(2.0);
      }
    Tensor o = clipped_linear(chunked_attention(q, k, v, linear(pos, l.relative_k_proj), valid, s), l.post);
    clamp_all(o, s.gradient_clipping);
    rms_norm(o, H, l.norm_post_attn.data(), false, 1e-6);
    add(x, o);

    // Gemma4AudioLightConv1d.
    Tensor c = x;
    rms_norm(c, H, l.conv_pre_norm.data(), false, s.rms_norm_eps);
    Tensor st = clipped_linear(c, l.linear_start);
    Tensor g(T1, H);
    for (int t = 0; t < T1; ++t)
      for (int i = 0; i < H; ++i) g.row(t)[i] = st.row(t)[i] / (1.0 + std::exp(-st.row(t)[H + i]));
    Tensor dw(T1, H);
    const int K = s.conv_kernel;
    for (int t = 0; t < T1; ++t)
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < K; ++j) {
          const int src = t + j - (K - 1);
          if (src >= 0) dw.row(t)[i] += double(l.depthwise[size_t(i) * K + j]) * g.row(src)[i];
        }
    clamp_all(dw, s.gradient_clipping);
    rms_norm(dw, H, l.conv_norm.data(), false, s.rms_norm_eps);
    for (double& e : dw.v) e = silu(e);
    add(x, clipped_linear(dw, l.linear_end));

    feed_forward(x, l.ffn2, s);
    clamp_all(x, s.gradient_clipping);
    rms_norm(x, H, l.norm_out.data(), false, 1e-6);
  }
  Tensor o = linear(x, w.output_proj);
  add_bias(o, w.output_bias);
  // get_audio_features: embed_audio on every row, then the padded rows are dropped.
  rms_norm(o, o.cols, nullptr, false, s.rms_norm_eps);
  const Tensor e = linear(o, w.embedding_projection);
  int rows = 0;
  for (bool b : valid) rows += b;
  Tensor kept(rows, e.cols);
  for (int t = 0, r = 0; t < T1; ++t)
    if (valid[size_t(t)]) std::copy(e.row(t), e.row(t) + e.cols, kept.row(r++));
  return to_embeddings(kept);
}

}  // namespace splitdec
