// Row operators the media encoder towers share (siglip_tower.cpp,
// gemma4_vision_tower.cpp, conformer_audio_tower.cpp, unified_embedder.cpp):
// clipped linears, LayerNorm with bias,
// row-parallel RMSNorm, bias adds, tanh-GELU, grid average pooling, the
// [tokens, heads, hd] -> [heads, tokens, hd] transpose the attention kernel
// reads, bidirectional attention through the flash kernel, and the weight
// shape checks. Every loop over rows runs on the global thread pool; each row
// is computed by one thread in a fixed order, so results do not depend on the
// thread count. Header-only: the towers are its only users, and it keeps the
// media library's source list unchanged.
//
// The float64 oracle (reference_towers.cpp) shares none of this.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/gelu.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "kernels/weight_matrix.h"
#include "media/clipped_linear.h"

namespace splitdec::tower {

// fn(r0, r1) over rows [0, rows) of `row_len` values each; ranges of at least
// ~32K values, so that small tensors stay on the calling thread.
template <class Fn>
void for_rows(int64_t rows, int64_t row_len, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(1, row_len));
  ThreadPool::global()->parallel_for(rows, [&](int64_t r0, int64_t r1) { fn(r0, r1); }, grain);
}

inline void clamp_copy(const float* x, size_t n, float lo, float hi, float* y) {
  for (size_t i = 0; i < n; ++i) y[i] = std::min(hi, std::max(lo, x[i]));
}

// clamp(x) -> x W^T -> clamp(y) on `rows` rows (Gemma4ClippableLinear;
// bounds absent: a plain linear); `scratch` holds the clamped input (at
// least rows x in).
inline void clipped_linear(const ClippedLinear& c, const float* x, int rows, float* scratch, float* y) {
  const size_t in = size_t(c.weight.in), out = size_t(c.weight.out);
  if (!c.clip) return linear(x, rows, c.weight, y);
  const ClippedLinear::Bounds b = *c.clip;
  for_rows(rows, int64_t(in), [&](int64_t r0, int64_t r1) {
    clamp_copy(x + size_t(r0) * in, size_t(r1 - r0) * in, b.input_min, b.input_max, scratch + size_t(r0) * in);
  });
  linear(scratch, rows, c.weight, y);
  for_rows(rows, int64_t(out), [&](int64_t r0, int64_t r1) {
    float* yr = y + size_t(r0) * out;
    clamp_copy(yr, size_t(r1 - r0) * out, b.output_min, b.output_max, yr);
  });
}

// One row: y = (x - mean) / sqrt(var + eps) * w + b (nn.LayerNorm, biased
// variance). Mean and variance in f64, two passes: rows of 6912 pixels with a
// large common offset would lose digits in a one-pass f32 sum. y may be x.
inline void layer_norm_row(const float* x, const float* w, const float* b, int n, float eps, float* y) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / n;
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float inv = float(1.0 / std::sqrt(ss / n + double(eps)));
  const float m = float(mean);
  for (int i = 0; i < n; ++i) y[i] = (x[i] - m) * inv * w[i] + b[i];
}

inline void layer_norm_rows(const float* x, const float* w, const float* b, int64_t rows, int n, float eps, float* y) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) layer_norm_row(x + r * n, w, b, n, eps, y + r * n);
  });
}

// ops::rms_norm over many rows, split across the pool.
inline void rms_norm_rows(const float* x, const float* w, int64_t rows, int n, float eps, bool adds_one, float* y) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) { ops::rms_norm(x + r0 * n, w, int(r1 - r0), n, eps, adds_one, y + r0 * n); });
}

inline void add_bias_rows(float* y, const float* bias, int64_t rows, int n) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int i = 0; i < n; ++i) y[r * n + i] += bias[i];
  });
}

// h += y (+ bias when given): a residual branch joining the stream.
inline void add_residual_rows(float* h, const float* y, const float* bias, int64_t rows, int n) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* hr = h + r * n;
      const float* yr = y + r * n;
      if (bias)
        for (int i = 0; i < n; ++i) hr[i] += yr[i] + bias[i];
      else
        for (int i = 0; i < n; ++i) hr[i] += yr[i];
    }
  });
}

// x[i] = gelu_tanh(x[i] + bias[i]) over rows of n (SigLIP's fc1 output).
inline void gelu_tanh_bias_rows(float* x, const float* bias, int64_t rows, int n) {
  for_rows(rows, n, [&](int64_t r0, int64_t r1) {
    float t[kGeluBlock];
    for (int64_t r = r0; r < r1; ++r) {
      float* xr = x + r * n;
      int i = 0;
      for (; i + kGeluBlock <= n; i += kGeluBlock) {
        for (int j = 0; j < kGeluBlock; ++j) t[j] = xr[i + j] + bias[i + j];
        for (int j = 0; j < kGeluBlock; ++j) t[j] = gelu_tanh(t[j]);
        std::copy_n(t, kGeluBlock, xr + i);
      }
      for (; i < n; ++i) xr[i] = gelu_tanh(xr[i] + bias[i]);
    }
  });
}

// gate[i] = gelu_tanh(gate[i]) * up[i] over rows of n (Gemma-4's MLP).
inline void gelu_tanh_gate_rows(float* gate, const float* up, int64_t rows, int n) {
  ops::gelu_tanh_gate(gate, up, size_t(rows) * size_t(n));
}

// x: [tokens, heads, hd] (+ bias [heads * hd] when given) -> out: [heads,
// tokens, hd], the KvView layout of one sequence.
inline void to_heads_major(const float* x, const float* bias, int64_t tokens, int heads, int hd, float* out) {
  const int width = heads * hd;
  for_rows(tokens, width, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int h = 0; h < heads; ++h) {
        const float* src = x + t * width + int64_t(h) * hd;
        float* dst = out + (int64_t(h) * tokens + t) * hd;
        if (bias)
          for (int d = 0; d < hd; ++d) dst[d] = src[d] + bias[h * hd + d];
        else
          std::copy_n(src, hd, dst);
      }
  });
}

// Average of each pool x pool block of a row-major rows x cols grid of
// `dim`-vectors, the blocks in row-major order over the pooled grid
// (AvgPool2d(pool) on the image layout; Gemma-4's bins by position are the
// same blocks). Sums in f64.
inline void average_pool_grid(const float* x, int rows, int cols, int dim, int pool, float* out) {
  const int prows = rows / pool, pcols = cols / pool;
  const double inv = 1.0 / (double(pool) * pool);
  for_rows(int64_t(prows) * pcols, int64_t(dim) * pool * pool, [&](int64_t b0, int64_t b1) {
    std::vector<double> acc(size_t(dim), 0.0);
    for (int64_t b = b0; b < b1; ++b) {
      const int py = int(b / pcols), px = int(b % pcols);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int dy = 0; dy < pool; ++dy)
        for (int dx = 0; dx < pool; ++dx) {
          const float* src = x + (int64_t(py * pool + dy) * cols + px * pool + dx) * dim;
          for (int d = 0; d < dim; ++d) acc[size_t(d)] += src[d];
        }
      float* dst = out + b * dim;
      for (int d = 0; d < dim; ++d) dst[d] = float(acc[size_t(d)] * inv);
    }
  });
}

// Bidirectional attention over one sequence of `tokens` (every query sees
// every key: one interval [0, tokens) per row) through the flash kernel.
class FullAttention {
 public:
  explicit FullAttention(int tokens) : tokens_(tokens), intervals_(size_t(tokens), KeyInterval{0, tokens}) {}
  // q: [tokens, heads, hd]; k, v: [kv_heads, tokens, hd]; out: [tokens, heads, hd].
  void run(const float* q, int heads, int kv_heads, int hd, float scale, const float* k, const float* v, float* out) const {
    const QueryBlock qb{q, 1, tokens_, heads, hd, 0, scale, 0.f};
    KvView kv;
    kv.k = k, kv.v = v, kv.batch = 1, kv.kv_heads = kv_heads, kv.head_dim = hd, kv.slots = tokens_;
    masked_prefill_attention(qb, kv, intervals_.data(), out);
  }

 private:
  int tokens_;
  std::vector<KeyInterval> intervals_;
};

// Weight shape checks: a loader or a hand-built struct that disagrees with the
// shape is a ConfigError naming the tensor, never an out-of-bounds read.
inline void expect_matrix(const WeightMatrix& w, int out, int in, const std::string& what) {
  if (w.out != out || w.in != in || w.data.size() != size_t(out) * weight_row_bytes(w.format, in))
    throw ConfigError(what + " is [" + std::to_string(w.out) + ", " + std::to_string(w.in) + "], the shape needs [" +
                      std::to_string(out) + ", " + std::to_string(in) + "]");
}

inline void expect_values(const std::vector<float>& v, int64_t n, const std::string& what) {
  if (int64_t(v.size()) != n)
    throw ConfigError(what + " has " + std::to_string(v.size()) + " values, the shape needs " + std::to_string(n));
}

// The projection's output width: text_hidden when the shape names it, else
// whatever the matrix has (a shape built without the text config).
inline int projection_width(const WeightMatrix& projection, int text_hidden) { return text_hidden > 0 ? text_hidden : projection.out; }

}  // namespace splitdec::tower
