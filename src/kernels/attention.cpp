#include "kernels/attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/flash_attention.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

namespace {

// Online-softmax state of one query row for the `group` heads sharing a KV head.
struct Partial {
  static constexpr int kMaxGroup = 64;
  float m[kMaxGroup], l[kMaxGroup];
};

// Empty online-softmax state for the `group` heads of one row.
void reset(Partial& p, float* acc, int group, int hd) {
  std::fill(acc, acc + int64_t(group) * hd, 0.f);
  std::fill(p.m, p.m + group, -std::numeric_limits<float>::infinity());
  std::fill(p.l, p.l + group, 0.f);
}

// Adds keys [lo, hi) of row r to acc [group, hd] (unnormalised) and p.m /
// p.l. Each key and value row is read once for the whole group; keys come in
// runs of consecutive slots (a ring wraps at most once).
void attend_range(const simd::KernelTable& t, const QueryBlock& q, const KvView& kv, int b, int r, int kvh, int64_t lo,
                  int64_t hi, Partial& p, float* acc) {
  const int hd = q.head_dim, group = q.heads / kv.kv_heads;
  const float* qrow = q.q + ((int64_t(b) * q.rows + r) * q.heads + int64_t(kvh) * group) * hd;
  for (int64_t j = lo; j < hi;) {
    const int64_t slot = kv.slot(j);
    const int64_t run = std::min(hi - j, kv.slots - slot);
    const int64_t at = kv.offset(b, kvh, j);
    if (kv.is_q8())
      t.attend_keys_q8(qrow, group, hd, q.scale, q.softcap, kv.k8 + at, kv.k_scale + at / hd, kv.v8 + at, kv.v_scale + at / hd,
                       int(run), p.m, p.l, acc);
    else if (kv.is_16bit())
      (kv.f16 ? t.attend_keys_f16 : t.attend_keys_bf16)(qrow, group, hd, q.scale, q.softcap, kv.k16 + at, kv.v16 + at, int(run), p.m,
                                                        p.l, acc);
    else
      t.attend_keys(qrow, group, hd, q.scale, q.softcap, kv.key(b, kvh, j), kv.value(b, kvh, j), int(run), p.m, p.l, acc);
    j += run;
  }
}

// A fresh state over keys [lo, hi).
void accumulate(const simd::KernelTable& t, const QueryBlock& q, const KvView& kv, int b, int r, int kvh, int64_t lo,
                int64_t hi, Partial& p, float* acc) {
  reset(p, acc, q.heads / kv.kv_heads, q.head_dim);
  attend_range(t, q, kv, b, r, kvh, lo, hi, p, acc);
}

void finish(const QueryBlock& q, const KvView& kv, int b, int r, int kvh, const Partial& p, const float* acc, float* out) {
  const int hd = q.head_dim, group = q.heads / kv.kv_heads;
  float* orow = out + ((int64_t(b) * q.rows + r) * q.heads + int64_t(kvh) * group) * hd;
  for (int g = 0; g < group; ++g) {
    const float inv = p.l[g] > 0.f ? 1.f / p.l[g] : 0.f;  // no visible key: zeros
    for (int d = 0; d < hd; ++d) orow[int64_t(g) * hd + d] = acc[int64_t(g) * hd + d] * inv;
  }
}

// One task per (sequence, row, KV head); `range(b, r)` gives the keys.
template <class Range>
void rows_attention(const CpuContext& cpu, const QueryBlock& q, const KvView& kv, Range range, float* out) {
  const simd::KernelTable& t = *cpu.table;
  const int group = q.heads / kv.kv_heads;
  const int64_t tasks = int64_t(q.batch) * q.rows * kv.kv_heads;
  cpu.pool->parallel_for(tasks, [&](int64_t t0, int64_t t1) {
    std::vector<float> acc(size_t(group) * size_t(q.head_dim));
    Partial p;
    for (int64_t task = t0; task < t1; ++task) {
      const int kvh = int(task % kv.kv_heads);
      const int r = int((task / kv.kv_heads) % q.rows);
      const int b = int(task / (int64_t(kv.kv_heads) * q.rows));
      const KeyInterval iv = range(b, r);
      accumulate(t, q, kv, b, r, kvh, iv.begin, iv.end, p, acc.data());
      finish(q, kv, b, r, kvh, p, acc.data(), out);
    }
  });
}

}  // namespace

void KvView::row_f32(bool values, int b, int h, int64_t pos, float* out) const {
  const int64_t at = offset(b, h, pos);
  if (is_q8()) {
    const int8_t* src = (values ? v8 : k8) + at;
    const float s = (values ? v_scale : k_scale)[at / head_dim];
    for (int d = 0; d < head_dim; ++d) out[d] = s * float(src[d]);
  } else if (is_16bit()) {
    const uint16_t* src = (values ? v16 : k16) + at;
    for (int d = 0; d < head_dim; ++d) out[d] = f16 ? f16_to_f32(src[d]) : bf16_to_f32(src[d]);
  } else {
    std::copy_n((values ? v : k) + at, head_dim, out);
  }
}

// Query tiles of kQueryTile rows walk key tiles of kKeyTile keys, so each
// key tile is read from memory once per query tile (not once per row); each
// row attends to its clipped sub-range key by key.
void rowwise_prefill_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out,
                               const CpuContext& cpu) {
  constexpr int kQueryTile = 8;
  constexpr int64_t kKeyTile = 64;
  const simd::KernelTable& t = *cpu.table;
  const int group = q.heads / kv.kv_heads, hd = q.head_dim;
  const int tiles = (q.rows + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = int64_t(q.batch) * kv.kv_heads * tiles;
  cpu.pool->parallel_for(tasks, [&](int64_t t0, int64_t t1) {
    std::vector<float> acc(size_t(kQueryTile) * size_t(group) * size_t(hd));
    Partial part[kQueryTile];
    for (int64_t task = t0; task < t1; ++task) {
      const int tile = int(task % tiles), kvh = int((task / tiles) % kv.kv_heads), b = int(task / (int64_t(tiles) * kv.kv_heads));
      const int r0 = tile * kQueryTile, r1 = std::min(q.rows, r0 + kQueryTile);
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (int r = r0; r < r1; ++r) {
        const KeyInterval iv = intervals[int64_t(b) * q.rows + r];
        if (iv.empty()) continue;
        lo = std::min(lo, iv.begin), hi = std::max(hi, iv.end);
      }
      const size_t row_acc = size_t(group) * size_t(hd);
      for (int r = r0; r < r1; ++r) reset(part[r - r0], acc.data() + size_t(r - r0) * row_acc, group, hd);
      for (int64_t j0 = lo; j0 < hi; j0 += kKeyTile) {
        const int64_t j1 = std::min(hi, j0 + kKeyTile);
        for (int r = r0; r < r1; ++r) {
          const KeyInterval iv = intervals[int64_t(b) * q.rows + r];
          const int64_t a = std::max(j0, iv.begin), e = std::min(j1, iv.end);
          if (a < e) attend_range(t, q, kv, b, r, kvh, a, e, part[r - r0], acc.data() + size_t(r - r0) * row_acc);
        }
      }
      for (int r = r0; r < r1; ++r) finish(q, kv, b, r, kvh, part[r - r0], acc.data() + size_t(r - r0) * row_acc, out);
    }
  });
}

void masked_prefill_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out,
                              const CpuContext& cpu) {
  if (q.rows == 1) return rowwise_prefill_attention(q, kv, intervals, out, cpu);
  flash_attention(q, kv, intervals, out, {}, cpu);
}

void gqa_attention(const QueryBlock& q, const KvView& kv, int window, const int64_t* seq_start, float* out,
                   const CpuContext& cpu) {
  auto range = [&](int b, int r) {
    const int64_t i = q.first_position + r;
    int64_t lo = seq_start[b];
    if (window > 0) lo = std::max(lo, i - window + 1);
    return KeyInterval{lo, i + 1};
  };
  if (q.rows > 1) {  // a prompt chunk: causal + window + start are one interval per row
    std::vector<KeyInterval> intervals(size_t(q.batch) * size_t(q.rows));
    for (int b = 0; b < q.batch; ++b)
      for (int r = 0; r < q.rows; ++r) intervals[size_t(b) * size_t(q.rows) + size_t(r)] = range(b, r);
    flash_attention(q, kv, intervals.data(), out, {}, cpu);
    return;
  }
  ThreadPool& pool = *cpu.pool;
  const int64_t heads_tasks = int64_t(q.batch) * q.rows * kv.kv_heads;
  if (heads_tasks >= 2 * pool.size()) {
    rows_attention(cpu, q, kv, range, out);
    return;
  }
  // Decode with few heads per thread: split each context across threads
  // (flash-decoding) and merge the partial softmaxes by log-sum-exp.
  const simd::KernelTable& t = *cpu.table;
  const int group = q.heads / kv.kv_heads, hd = q.head_dim;
  int64_t longest = 0;
  for (int b = 0; b < q.batch; ++b) longest = std::max(longest, range(b, 0).end - range(b, 0).begin);
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>((2 * pool.size() + heads_tasks - 1) / heads_tasks, longest / 512));
  std::vector<Partial> parts(size_t(heads_tasks * splits));
  std::vector<float> accs(parts.size() * size_t(group) * size_t(hd));
  pool.parallel_for(heads_tasks * splits, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t head_task = task / splits, split = task % splits;
      const int kvh = int(head_task % kv.kv_heads), b = int(head_task / kv.kv_heads);
      const KeyInterval iv = range(b, 0);
      const int64_t len = std::max<int64_t>(0, iv.end - iv.begin);
      const int64_t lo = iv.begin + len * split / splits, hi = iv.begin + len * (split + 1) / splits;
      accumulate(t, q, kv, b, 0, kvh, lo, hi, parts[size_t(task)], accs.data() + size_t(task) * size_t(group) * size_t(hd));
    }
  });
  for (int64_t head_task = 0; head_task < heads_tasks; ++head_task) {
    Partial merged = parts[size_t(head_task * splits)];
    float* acc = accs.data() + size_t(head_task * splits) * size_t(group) * size_t(hd);
    for (int64_t s = 1; s < splits; ++s) {
      const Partial& p = parts[size_t(head_task * splits + s)];
      const float* a2 = accs.data() + size_t(head_task * splits + s) * size_t(group) * size_t(hd);
      for (int g = 0; g < group; ++g) {
        if (p.l[g] == 0.f) continue;
        const float m = std::max(merged.m[g], p.m[g]);
        const float c1 = merged.l[g] > 0.f ? std::exp(merged.m[g] - m) : 0.f, c2 = std::exp(p.m[g] - m);
        merged.l[g] = merged.l[g] * c1 + p.l[g] * c2;
        merged.m[g] = m;
        for (int d = 0; d < hd; ++d) acc[g * hd + d] = acc[g * hd + d] * c1 + a2[g * hd + d] * c2;
      }
    }
    finish(q, kv, int(head_task / kv.kv_heads), 0, int(head_task % kv.kv_heads), merged, acc, out);
  }
}

void dense_bias_attention(const QueryBlock& q, const KvView& kv, const float* bias, float* out, const CpuContext& cpu) {
  const int64_t total = q.first_position + q.rows;
  const int hd = q.head_dim, group = q.heads / kv.kv_heads;
  const simd::KernelTable& t = *cpu.table;
  // A generic kernel: every head reads every key, with the bias added.
  cpu.pool->parallel_for(int64_t(q.batch) * q.rows * q.heads, [&](int64_t t0, int64_t t1) {
    std::vector<float> scores(static_cast<size_t>(total));
    for (int64_t task = t0; task < t1; ++task) {
      const int h = int(task % q.heads), r = int((task / q.heads) % q.rows), b = int(task / (int64_t(q.heads) * q.rows));
      const float* brow = bias + (int64_t(b) * q.rows + r) * total;
      const float* qh = q.q + ((int64_t(b) * q.rows + r) * q.heads + h) * hd;
      float* oh = out + ((int64_t(b) * q.rows + r) * q.heads + h) * hd;
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < total; ++j) {
        float sc = t.dot_f32(qh, kv.key(b, h / group, j), hd) * q.scale;
        if (q.softcap > 0) sc = q.softcap * std::tanh(sc / q.softcap);
        scores[size_t(j)] = sc + brow[j];
        m = std::max(m, scores[size_t(j)]);
      }
      std::fill(oh, oh + hd, 0.f);
      if (m == -std::numeric_limits<float>::infinity()) continue;
      float l = 0.f;
      for (int64_t j = 0; j < total; ++j) {
        const float p = std::exp(scores[size_t(j)] - m);
        if (p == 0.f) continue;
        l += p;
        t.scale_axpy(oh, 1.f, p, kv.value(b, h / group, j), hd);
      }
      for (int d = 0; d < hd; ++d) oh[d] /= l;
    }
  });
}

}  // namespace splitdec
