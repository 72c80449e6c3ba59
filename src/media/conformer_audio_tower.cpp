#include "media/conformer_audio_tower.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "media/tower_ops.h"

namespace splitdec {

namespace {

using namespace tower;

const std::string kTower = "Gemma-4 conformer audio tower: ";
// HF builds the FFN and layer norms as Gemma4RMSNorm(hidden) with the
// class default eps, not config.rms_norm_eps (which only the light conv's
// norms, the subsampling LayerNorms and the embedder take).
constexpr float kBlockNormEps = 1e-6f;

void check_shape(const ConformerAudioShape& s) {
  const bool ok = s.hidden > 0 && s.heads > 0 && s.hidden % s.heads == 0 && s.layers >= 0 && s.channels0 > 0 &&
                  s.channels1 > 0 && s.conv_kernel > 0 && s.chunk > 0 && s.context_left >= 2 && s.output_proj_dims > 0 &&
                  s.features.bins > 0 && s.logit_cap > 0;
  if (!ok)
    throw ConfigError(kTower + "unsupported shape: hidden " + std::to_string(s.hidden) + ", " + std::to_string(s.heads) +
                      " heads, channels " + std::to_string(s.channels0) + "/" + std::to_string(s.channels1) + ", kernel " +
                      std::to_string(s.conv_kernel) + ", chunk " + std::to_string(s.chunk) + ", context_left " +
                      std::to_string(s.context_left) + " (heads must divide hidden; context_left at least 2)");
}

void check_clipped(const ClippedLinear& c, int out, int in, const std::string& what) { expect_matrix(c.weight, out, in, what); }

float silu(float x) { return x / (1.f + std::exp(-x)); }

// y = RMSNorm(clamp(x, +-limit)) with weight w: the clamp-then-norm every block starts and ends with.
void clamp_norm_rows(const float* x, const std::vector<float>& w, int rows, int n, float limit, float eps, float* y) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    const size_t a = size_t(r0) * n, m = size_t(r1 - r0) * n;
    clamp_copy(x + a, m, -limit, limit, y + a);
    ops::rms_norm(y + a, w.data(), int(r1 - r0), n, eps, false, y + a);
  });
}

struct Buffers {
  std::vector<float> a, wide, narrow, scratch, q, k, v, attn;
};

// x += 0.5 * post_norm(clamp(down(silu(up(pre_norm(clamp(x)))))))
void feed_forward(const ConformerAudioShape& s, const ConformerFeedForward& f, float* x, int N, Buffers& b) {
  const int H = s.hidden, I = 4 * H;
  const float limit = float(s.gradient_clipping);
  clamp_norm_rows(x, f.pre_norm, N, H, limit, kBlockNormEps, b.a.data());
  clipped_linear(f.up, b.a.data(), N, b.scratch.data(), b.wide.data());
  for_rows(N, I, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0) * I; i < size_t(r1) * I; ++i) b.wide[i] = silu(b.wide[i]);
  });
  clipped_linear(f.down, b.wide.data(), N, b.scratch.data(), b.narrow.data());
  clamp_norm_rows(b.narrow.data(), f.post_norm, N, H, limit, kBlockNormEps, b.narrow.data());
  const float scale = s.residual_weight;
  for_rows(N, H, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0) * H; i < size_t(r1) * H; ++i) x[i] += b.narrow[i] * scale;
  });
}

// The sinusoid rows HF's Gemma4AudioRelPositionalEncoding gives: row c holds
// [sin(p * inv_ts), cos(p * inv_ts)] of position p = context_size / 2 - c.
std::vector<float> relative_positions(const ConformerAudioShape& s) {
  const int H = s.hidden, half = H / 2, P = s.rel_positions(), top = P - 1;
  const double increment = std::log(10000.0) / std::max(half - 1, 1);
  std::vector<float> pos(size_t(P) * H, 0.f);
  for (int c = 0; c < P; ++c)
    for (int i = 0; i < half; ++i) {
      // HF: inv_timescales in f32, position * inv in f32, then sin / cos.
      const float inv = float(std::exp(double(i) * -increment));
      const float t = float(top - c) * inv;
      pos[size_t(c) * H + i] = float(std::sin(double(t)));
      pos[size_t(c) * H + half + i] = float(std::cos(double(t)));
    }
  return pos;
}

// Chunked local attention, written per query: HF's blocks, context windows,
// _rel_shift and masks leave each query t the keys t - d, d = 0 ..
// window - 1, with the relative term q . relk[window - d] (zero past the
// table); the masked keys get exp(-1e9 - max) = 0 exactly in HF, so they are
// simply absent here.
void local_attention(const ConformerAudioShape& s, const float* q, const float* k, const float* v, const float* relk,
                     int N, float* out) {
  const int H = s.hidden, heads = s.heads, hd = s.head_dim(), W = s.window(), P = s.rel_positions();
  const float cap = s.logit_cap;
  for_rows(N, int64_t(H) * W * 2, [&](int64_t t0, int64_t t1) {
    std::vector<float> logit(static_cast<size_t>(W));
    for (int64_t t = t0; t < t1; ++t) {
      const int keys = int(std::min<int64_t>(W, t + 1));
      for (int h = 0; h < heads; ++h) {
        const float* qh = q + size_t(t) * H + size_t(h) * hd;
        float best = -INFINITY;
        for (int d = 0; d < keys; ++d) {
          const float* kh = k + size_t(t - d) * H + size_t(h) * hd;
          float ac = 0.f, bd = 0.f;
          for (int i = 0; i < hd; ++i) ac += qh[i] * kh[i];
          const int c = W - d;
          if (c < P) {
            const float* rh = relk + size_t(c) * H + size_t(h) * hd;
            for (int i = 0; i < hd; ++i) bd += qh[i] * rh[i];
          }
          const float l = std::tanh((ac + bd) / cap) * cap;
          logit[size_t(d)] = l;
          best = std::max(best, l);
        }
        float sum = 0.f;
        for (int d = 0; d < keys; ++d) sum += (logit[size_t(d)] = std::exp(logit[size_t(d)] - best));
        float* oh = out + size_t(t) * H + size_t(h) * hd;
        std::fill(oh, oh + hd, 0.f);
        for (int d = 0; d < keys; ++d) {
          const float w = logit[size_t(d)] / sum;
          const float* vh = v + size_t(t - d) * H + size_t(h) * hd;
          for (int i = 0; i < hd; ++i) oh[i] += w * vh[i];
        }
      }
    }
  });
}

void attention_block(const ConformerAudioShape& s, const ConformerLayerWeights& l, const std::vector<float>& positions,
                     float* x, int N, Buffers& b) {
  const int H = s.hidden, hd = s.head_dim(), P = s.rel_positions();
  const float limit = float(s.gradient_clipping);
  clamp_norm_rows(x, l.norm_pre_attn, N, H, limit, kBlockNormEps, b.a.data());
  clipped_linear(l.q_proj, b.a.data(), N, b.scratch.data(), b.q.data());
  clipped_linear(l.k_proj, b.a.data(), N, b.scratch.data(), b.k.data());
  clipped_linear(l.v_proj, b.a.data(), N, b.scratch.data(), b.v.data());
  // q x head_dim^-0.5 / ln 2 x softplus(per_dim_scale); k x ln(1 + e) / ln 2.
  const float q_scale = float(std::pow(double(hd), -0.5) / std::numbers::ln2);
  const float k_scale = float(std::log1p(std::numbers::e) / std::numbers::ln2);
  std::vector<float> qmul(static_cast<size_t>(hd));
  for (int i = 0; i < hd; ++i) qmul[size_t(i)] = float(std::log1p(std::exp(double(l.per_dim_scale[size_t(i)]))));
  for_rows(N, H, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int i = 0; i < H; ++i) {
        b.q[size_t(r) * H + i] = b.q[size_t(r) * H + i] * q_scale * qmul[size_t(i % hd)];
        b.k[size_t(r) * H + i] *= k_scale;
      }
  });
  std::vector<float> relk(size_t(P) * H);
  linear(positions.data(), P, l.relative_k_proj, relk.data());
  local_attention(s, b.q.data(), b.k.data(), b.v.data(), relk.data(), N, b.attn.data());
  clipped_linear(l.post, b.attn.data(), N, b.scratch.data(), b.narrow.data());
  clamp_norm_rows(b.narrow.data(), l.norm_post_attn, N, H, limit, kBlockNormEps, b.narrow.data());
  add_residual_rows(x, b.narrow.data(), nullptr, N, H);
}

// x += linear_end(silu(conv_norm(clamp(causal_depthwise(glu(linear_start(pre_norm(x))))))))
void light_conv(const ConformerAudioShape& s, const ConformerLayerWeights& l, float* x, int N, Buffers& b) {
  const int H = s.hidden, K = s.conv_kernel;
  const float limit = float(s.gradient_clipping), eps = s.rms_norm_eps;
  rms_norm_rows(x, l.conv_pre_norm.data(), N, H, eps, false, b.a.data());
  clipped_linear(l.linear_start, b.a.data(), N, b.scratch.data(), b.wide.data());  // [N, 2H]
  // GLU: first half x sigmoid(second half), into `q` (free until the next attention).
  float* g = b.q.data();
  for_rows(N, 2 * H, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* in = b.wide.data() + size_t(r) * 2 * H;
      for (int i = 0; i < H; ++i) g[size_t(r) * H + i] = in[i] * (1.f / (1.f + std::exp(-in[H + i])));
    }
  });
  // Causal depthwise conv, K - 1 zeros on the left: y[t] = sum_k w[k] g[t - (K - 1) + k].
  for_rows(N, H * K, [&](int64_t r0, int64_t r1) {
    for (int64_t t = r0; t < r1; ++t) {
      float* y = b.a.data() + size_t(t) * H;
      for (int c = 0; c < H; ++c) {
        const float* w = l.depthwise.data() + size_t(c) * K;
        float acc = 0.f;
        for (int j = 0; j < K; ++j) {
          const int64_t src = t - (K - 1) + j;
          if (src >= 0) acc += w[j] * g[size_t(src) * H + c];
        }
        y[c] = acc;
      }
    }
  });
  clamp_norm_rows(b.a.data(), l.conv_norm, N, H, limit, eps, b.a.data());
  for_rows(N, H, [&](int64_t r0, int64_t r1) {
    for (size_t i = size_t(r0) * H; i < size_t(r1) * H; ++i) b.a[i] = silu(b.a[i]);
  });
  clipped_linear(l.linear_end, b.a.data(), N, b.scratch.data(), b.narrow.data());
  add_residual_rows(x, b.narrow.data(), nullptr, N, H);
}

// Conv2d 3x3, stride 2, pad 1 of a [T, F, cin] map by rows of
// [cout, cin * 9] -> [ceil(T/2), ceil(F/2), cout], then LayerNorm over the
// channels (weight, no bias) and ReLU. Run through linear() on im2col slabs.
std::vector<float> subsample_layer(const std::vector<float>& in, int T, int F, int cin, const WeightMatrix& conv,
                                   const std::vector<float>& norm, float eps, int* T_out, int* F_out) {
  const int To = (T + 1) / 2, Fo = (F + 1) / 2, cout = conv.out, width = cin * 9;
  std::vector<float> out(size_t(To) * Fo * cout);
  const std::vector<float> zero_bias(size_t(cout), 0.f);
  const int slab = std::max(1, (1 << 20) / std::max(1, Fo * width));  // output time rows per im2col slab (~4 MiB)
  std::vector<float> cols(size_t(std::min(slab, To)) * Fo * width);
  for (int t0 = 0; t0 < To; t0 += slab) {
    const int t1 = std::min(To, t0 + slab);
    for_rows(int64_t(t1 - t0) * Fo, width, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int t = t0 + int(r / Fo), f = int(r % Fo);
        float* dst = cols.data() + size_t(r) * width;
        for (int ci = 0; ci < cin; ++ci)
          for (int dt = 0; dt < 3; ++dt)
            for (int df = 0; df < 3; ++df) {
              const int st = 2 * t - 1 + dt, sf = 2 * f - 1 + df;
              dst[ci * 9 + dt * 3 + df] = st >= 0 && st < T && sf >= 0 && sf < F ? in[(size_t(st) * F + sf) * cin + ci] : 0.f;
            }
      }
    });
    linear(cols.data(), (t1 - t0) * Fo, conv, out.data() + size_t(t0) * Fo * cout);
  }
  layer_norm_rows(out.data(), norm.data(), zero_bias.data(), int64_t(To) * Fo, cout, eps, out.data());
  for (float& v : out) v = std::max(v, 0.f);
  *T_out = To, *F_out = Fo;
  return out;
}

}  // namespace

void check_conformer_weights(const ConformerAudioShape& s, const ConformerAudioWeights& w) {
  check_shape(s);
  const int H = s.hidden, hd = s.head_dim();
  expect_values(w.conv0, int64_t(s.channels0) * 9, kTower + "subsample_conv_projection.layer0.conv");
  expect_matrix(w.conv1, s.channels1, s.channels0 * 9, kTower + "subsample_conv_projection.layer1.conv");
  expect_values(w.norm0, s.channels0, kTower + "subsample_conv_projection.layer0.norm");
  expect_values(w.norm1, s.channels1, kTower + "subsample_conv_projection.layer1.norm");
  expect_matrix(w.input_proj, H, s.proj_input(), kTower + "input_proj_linear");
  if (int(w.layers.size()) != s.layers)
    throw ConfigError(kTower + std::to_string(w.layers.size()) + " layers of weights, the shape has " + std::to_string(s.layers));
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const ConformerLayerWeights& l = w.layers[i];
    const std::string at = kTower + "layer " + std::to_string(i) + " ";
    for (const ConformerFeedForward* f : {&l.ffn1, &l.ffn2}) {
      check_clipped(f->up, 4 * H, H, at + "ffw_layer_1");
      check_clipped(f->down, H, 4 * H, at + "ffw_layer_2");
      expect_values(f->pre_norm, H, at + "feed_forward pre_layer_norm");
      expect_values(f->post_norm, H, at + "feed_forward post_layer_norm");
    }
    for (const ClippedLinear* c : {&l.q_proj, &l.k_proj, &l.v_proj, &l.post}) check_clipped(*c, H, H, at + "attention projection");
    expect_matrix(l.relative_k_proj, H, H, at + "relative_k_proj");
    expect_values(l.per_dim_scale, hd, at + "per_dim_scale");
    check_clipped(l.linear_start, 2 * H, H, at + "lconv1d.linear_start");
    check_clipped(l.linear_end, H, H, at + "lconv1d.linear_end");
    expect_values(l.depthwise, int64_t(H) * s.conv_kernel, at + "lconv1d.depthwise_conv1d");
    for (const std::vector<float>* v : {&l.norm_pre_attn, &l.norm_post_attn, &l.norm_out, &l.conv_pre_norm, &l.conv_norm})
      expect_values(*v, H, at + "norm");
  }
  expect_matrix(w.output_proj, s.output_proj_dims, H, kTower + "output_proj");
  expect_values(w.output_bias, s.output_proj_dims, kTower + "output_proj.bias");
  expect_matrix(w.embedding_projection, projection_width(w.embedding_projection, s.text_hidden), s.output_proj_dims,
                kTower + "embed_audio.embedding_projection");
}

int64_t conformer_audio_tokens(const ConformerAudioShape& s, int64_t samples) {
  const int64_t frames = log_mel_frames(samples, s.features);
  return (frames + 3) / 4;  // two stride-2 convs: ceil(ceil(frames / 2) / 2)
}

MediaEmbeddings conformer_audio_encode(const ConformerAudioShape& s, const ConformerAudioWeights& w, const AudioClip& clip,
                                       const LayerProgress& progress) {
  if (clip.sample_rate != s.features.sample_rate)
    throw InputError(kTower + "the clip is sampled at " + std::to_string(clip.sample_rate) + " Hz, the model takes " +
                     std::to_string(s.features.sample_rate) + " Hz");
  const int64_t frames = log_mel_frames(int64_t(clip.samples.size()), s.features);
  if (frames == 0)
    throw InputError(kTower + "the clip has " + std::to_string(clip.samples.size()) + " samples; one 20 ms mel frame needs at least " +
                     std::to_string(s.features.frame_length - s.features.frame_length / 2 + 1) + " (about 10 ms at 16 kHz)");
  for (size_t i = 0; i < clip.samples.size(); ++i)
    if (!std::isfinite(clip.samples[i]))
      throw InputError(kTower + "the clip holds a non-finite sample (NaN or Inf) at sample " + std::to_string(i));
  return conformer_audio_encode_features(s, w, log_mel_features(clip.samples, s.features), frames, progress);
}

MediaEmbeddings conformer_audio_encode_features(const ConformerAudioShape& s, const ConformerAudioWeights& w,
                                                const std::vector<float>& features, int64_t frames,
                                                const LayerProgress& progress) {
  check_conformer_weights(s, w);
  const int F = s.features.bins;
  if (frames <= 0) throw InputError(kTower + "no mel frames to encode");
  if (frames > (int64_t(1) << 24)) throw InputError(kTower + std::to_string(frames) + " mel frames are too many to encode");
  if (int64_t(features.size()) != frames * F)
    throw InputError(kTower + std::to_string(features.size()) + " feature values for " + std::to_string(frames) +
                     " frames of " + std::to_string(F) + " bins");

  // Subsampling: [T, F, 1] -> [T/2, F/2, c0] -> [T/4, F/4, c1] -> input_proj_linear.
  int T0 = 0, F0 = 0, T1 = 0, F1 = 0;
  const WeightMatrix conv0 = WeightMatrix::from_f32(WeightFormat::F32, s.channels0, 9, w.conv0.data());
  const std::vector<float> l0 = subsample_layer(features, int(frames), F, 1, conv0, w.norm0, s.rms_norm_eps, &T0, &F0);
  const std::vector<float> l1 = subsample_layer(l0, T0, F0, s.channels0, w.conv1, w.norm1, s.rms_norm_eps, &T1, &F1);
  const int N = T1, H = s.hidden;
  std::vector<float> x(size_t(N) * H);
  linear(l1.data(), N, w.input_proj, x.data());  // rows of [F1][c1]: HF's permute(0, 2, 3, 1) order

  Buffers b;
  const size_t n = size_t(N);
  b.a.resize(n * H), b.wide.resize(n * 4 * H), b.narrow.resize(n * H), b.scratch.resize(n * 4 * H);
  b.q.resize(n * H), b.k.resize(n * H), b.v.resize(n * H), b.attn.resize(n * H);
  const std::vector<float> positions = relative_positions(s);
  const float limit = float(s.gradient_clipping);
  for (size_t li = 0; li < w.layers.size(); ++li) {
    const ConformerLayerWeights& l = w.layers[li];
    if (progress) progress(int(li), int(w.layers.size()));
    feed_forward(s, l.ffn1, x.data(), N, b);
    attention_block(s, l, positions, x.data(), N, b);
    light_conv(s, l, x.data(), N, b);
    feed_forward(s, l.ffn2, x.data(), N, b);
    clamp_norm_rows(x.data(), l.norm_out, N, H, limit, kBlockNormEps, x.data());
  }
  if (progress) progress(int(w.layers.size()), int(w.layers.size()));

  // output_proj (+ bias) -> embed_audio: weightless RMSNorm -> projection.
  const int P = s.output_proj_dims;
  std::vector<float> o(n * P);
  linear(x.data(), N, w.output_proj, o.data());
  add_bias_rows(o.data(), w.output_bias.data(), N, P);
  rms_norm_rows(o.data(), nullptr, N, P, s.rms_norm_eps, false, o.data());
  MediaEmbeddings result;
  result.rows = N;
  result.data.resize(n * size_t(w.embedding_projection.out));
  linear(o.data(), N, w.embedding_projection, result.data.data());
  return result;
}

}  // namespace splitdec
