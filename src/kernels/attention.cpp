#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace splitdec {

namespace {

// Online softmax over keys [lo, hi) for the `group` query heads that share
// KV head `kvh`: each key and value row is read once for the whole group.
void attend_group(const QueryBlock& q, const KvView& kv, int b, int r, int kvh, int64_t lo, int64_t hi, float* out) {
  const int hd = q.head_dim, group = q.heads / kv.kv_heads;
  const float* qrow = q.q + ((int64_t(b) * q.rows + r) * q.heads + int64_t(kvh) * group) * hd;
  float* orow = out + ((int64_t(b) * q.rows + r) * q.heads + int64_t(kvh) * group) * hd;
  std::fill(orow, orow + int64_t(group) * hd, 0.f);
  if (hi <= lo) return;
  float m[64], l[64];  // group size is at most 64 (checked by callers via heads / kv_heads)
  std::fill(m, m + group, -std::numeric_limits<float>::infinity());
  std::fill(l, l + group, 0.f);
  for (int64_t j = lo; j < hi; ++j) {
    const float* kj = kv.key(b, kvh, j);
    const float* vj = kv.value(b, kvh, j);
    for (int g = 0; g < group; ++g) {
      const float* qg = qrow + int64_t(g) * hd;
      float s = 0.f;
      for (int d = 0; d < hd; ++d) s += qg[d] * kj[d];
      s *= q.scale;
      float* og = orow + int64_t(g) * hd;
      if (s > m[g]) {  // rescale what was accumulated under the old maximum
        const float c = std::exp(m[g] - s);
        l[g] *= c;
        for (int d = 0; d < hd; ++d) og[d] *= c;
        m[g] = s;
      }
      const float p = std::exp(s - m[g]);
      l[g] += p;
      for (int d = 0; d < hd; ++d) og[d] += p * vj[d];
    }
  }
  for (int g = 0; g < group; ++g) {
    float* og = orow + int64_t(g) * hd;
    const float inv = 1.f / l[g];
    for (int d = 0; d < hd; ++d) og[d] *= inv;
  }
}

}  // namespace

void masked_prefill_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out) {
  for (int b = 0; b < q.batch; ++b)
    for (int r = 0; r < q.rows; ++r) {
      const KeyInterval iv = intervals[int64_t(b) * q.rows + r];
      for (int h = 0; h < kv.kv_heads; ++h) attend_group(q, kv, b, r, h, iv.begin, iv.end, out);
    }
}

void gqa_attention(const QueryBlock& q, const KvView& kv, int window, const int64_t* seq_start, float* out) {
  for (int b = 0; b < q.batch; ++b)
    for (int r = 0; r < q.rows; ++r) {
      const int64_t i = q.first_position + r;
      int64_t lo = seq_start[b];
      if (window > 0) lo = std::max(lo, i - window + 1);
      for (int h = 0; h < kv.kv_heads; ++h) attend_group(q, kv, b, r, h, lo, i + 1, out);
    }
}

void dense_bias_attention(const QueryBlock& q, const KvView& kv, const float* bias, float* out) {
  const int64_t total = q.first_position + q.rows;
  const int hd = q.head_dim, group = q.heads / kv.kv_heads;
  std::vector<float> scores(static_cast<size_t>(total));
  for (int b = 0; b < q.batch; ++b)
    for (int r = 0; r < q.rows; ++r) {
      const float* brow = bias + (int64_t(b) * q.rows + r) * total;
      for (int h = 0; h < q.heads; ++h) {
        // A generic kernel: every head reads every key, with the bias added.
        const float* qh = q.q + ((int64_t(b) * q.rows + r) * q.heads + h) * hd;
        float* oh = out + ((int64_t(b) * q.rows + r) * q.heads + h) * hd;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < total; ++j) {
          const float* kj = kv.key(b, h / group, j);
          float s = 0.f;
          for (int d = 0; d < hd; ++d) s += qh[d] * kj[d];
          scores[size_t(j)] = s * q.scale + brow[j];
          m = std::max(m, scores[size_t(j)]);
        }
        std::fill(oh, oh + hd, 0.f);
        if (m == -std::numeric_limits<float>::infinity()) continue;
        float l = 0.f;
        for (int64_t j = 0; j < total; ++j) {
          const float p = std::exp(scores[size_t(j)] - m);
          if (p == 0.f) continue;
          l += p;
          const float* vj = kv.value(b, h / group, j);
          for (int d = 0; d < hd; ++d) oh[d] += p * vj[d];
        }
        for (int d = 0; d < hd; ++d) oh[d] /= l;
      }
    }
}

}  // namespace splitdec
