#include "kernels/flash_attention.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

namespace {

// Query columns are padded to this many lanes (a multiple of every table's
// vector width), so the softmax runs without tails.
constexpr int kLanes = 16;

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// 64-byte aligned scratch: the GEMM rows then never straddle cache lines.
class Scratch {
 public:
  explicit Scratch(size_t n) : p_(static_cast<float*>(::operator new[](std::max<size_t>(n, 1) * sizeof(float), std::align_val_t(64)))) {}
  ~Scratch() { ::operator delete[](p_, std::align_val_t(64)); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* get() const { return p_; }

 private:
  float* p_;
};

// Keys (values: `values`) at positions [a, a + n) of one KV head as f32 rows
// [n][head_dim]: read in place when stored f32 in consecutive slots, else
// converted (16-bit, q8) or gathered (a ring wrapping inside the tile) into buf,
// once per tile for the whole stacked group.
const float* f32_rows(const simd::KernelTable& t, const KvView& kv, bool values, int b, int h, int64_t a, int n, float* buf) {
  const int hd = kv.head_dim;
  if (kv.is_f32() && kv.slot(a) + n <= kv.slots) return (values ? kv.v : kv.k) + kv.offset(b, h, a);
  for (int64_t j = a; j < a + n;) {
    const int64_t run = std::min(a + n - j, kv.slots - kv.slot(j));
    float* dst = buf + (j - a) * hd;
    const int64_t at = kv.offset(b, h, j);
    if (kv.is_q8())
      t.expand_q8_rows((values ? kv.v8 : kv.k8) + at, (values ? kv.v_scale : kv.k_scale) + at / hd, int(run), hd, dst);
    else if (kv.is_16bit())
      (kv.f16 ? t.expand_f16 : t.expand_bf16)((values ? kv.v16 : kv.k16) + at, int(run * hd), dst);
    else
      std::memcpy(dst, (values ? kv.v : kv.k) + at, size_t(run * hd) * sizeof(float));
    j += run;
  }
  return buf;
}

// Per-thread buffers, sized for the largest tile of a call.
struct TileBuffers {
  TileBuffers(int hd, int cols, int rows, int keys)
      : qt(size_t(hd) * cols), s(size_t(keys) * cols), o(size_t(rows) * round_up(hd, kLanes)), k(size_t(keys) * hd),
        v(size_t(keys) * hd), mx(size_t(cols)), l(size_t(cols)), c(size_t(cols)), lo(size_t(cols)), hi(size_t(cols)) {}
  Scratch qt, s, o, k, v, mx, l, c;
  std::vector<int32_t> lo, hi;
};

struct Shape {
  int group, hd, tile_rows, keys;
};

// One work item: query rows [r0, r1) of sequence b, the `group` heads of KV head kvh.
void run_tile(const simd::KernelTable& t, const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, const Shape& sh, int b,
              int kvh, int r0, int r1, TileBuffers& buf, float* out) {
  const int group = sh.group, hd = sh.hd, keys = sh.keys;
  const int m = (r1 - r0) * group, mp = round_up(m, kLanes), hdp = round_up(hd, kLanes);
  const KeyInterval* iv = intervals + int64_t(b) * q.rows;
  auto out_row = [&](int col) { return out + ((int64_t(b) * q.rows + r0 + col / group) * q.heads + int64_t(kvh) * group + col % group) * hd; };

  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int r = r0; r < r1; ++r)
    if (!iv[r].empty()) lo = std::min(lo, iv[r].begin), hi = std::max(hi, iv[r].end);
  if (lo >= hi) {  // no row sees a key: zeros
    for (int col = 0; col < m; ++col) std::fill(out_row(col), out_row(col) + hd, 0.f);
    return;
  }

  // Q^T [hd][mp], scaled once here rather than per score; column = row * group + head.
  float* qt = buf.qt.get();
  for (int col = 0; col < m; ++col) {
    const float* src = q.q + ((int64_t(b) * q.rows + r0 + col / group) * q.heads + int64_t(kvh) * group + col % group) * hd;
    for (int d = 0; d < hd; ++d) qt[int64_t(d) * mp + col] = src[d] * q.scale;
  }
  for (int d = 0; d < hd; ++d) std::fill(qt + int64_t(d) * mp + m, qt + int64_t(d) * mp + mp, 0.f);
  // Each column's interval relative to lo (int32: a tile spans far fewer than 2^31 keys); padding columns see nothing.
  for (int col = 0; col < mp; ++col) {
    const KeyInterval v = col < m ? iv[r0 + col / group] : KeyInterval{};
    buf.lo[size_t(col)] = v.empty() ? 0 : int32_t(v.begin - lo);
    buf.hi[size_t(col)] = v.empty() ? 0 : int32_t(v.end - lo);
  }
  float *mx = buf.mx.get(), *l = buf.l.get(), *c = buf.c.get(), *s = buf.s.get(), *o = buf.o.get();
  std::fill(mx, mx + mp, -std::numeric_limits<float>::infinity());
  std::fill(l, l + mp, 0.f);
  std::fill(o, o + int64_t(m) * hdp, 0.f);

  // Key tiles aligned to multiples of `keys` (clipped to [lo, hi)), so a
  // row meets the same tiles whatever rows share its work item.
  for (int64_t j0 = lo / keys * keys; j0 < hi; j0 += keys) {
    const int64_t a = std::max(j0, lo), e = std::min(j0 + keys, hi);
    bool any = false, full = true;
    for (int r = r0; r < r1; ++r) {
      any |= std::max(a, iv[r].begin) < std::min(e, iv[r].end);
      full &= iv[r].begin <= a && e <= iv[r].end;
    }
    if (!any) continue;  // empty tile
    const int n = int(e - a);
    const float* kp = f32_rows(t, kv, false, b, kvh, a, n, buf.k.get());
    t.gemm_f32(n, mp, hd, kp, hd, 1, qt, mp, s, mp, nullptr);  // S^T = K Q^T [n][mp]
    t.flash_softmax(s, mp, n, mp, int32_t(a - lo), buf.lo.data(), buf.hi.data(), !full, q.softcap, mx, l, c);
    const float* vp = f32_rows(t, kv, true, b, kvh, a, n, buf.v.get());
    t.gemm_f32(m, hd, n, s, 1, mp, vp, hd, o, hdp, c);  // O = diag(c) O + P V
  }
  for (int col = 0; col < m; ++col) {
    const float inv = l[col] > 0.f ? 1.f / l[col] : 0.f;  // no visible key: zeros
    float* dst = out_row(col);
    for (int d = 0; d < hd; ++d) dst[d] = o[int64_t(col) * hdp + d] * inv;
  }
}

}  // namespace

// Measured on AVX-512 and AVX2 (docs/kernels.md): the kernel is flat
// within ~10% over 64..256 stacked rows and 64..128 keys; wider tiles help
// small head dims (less softmax and packing per multiply-add), narrower ones
// keep the Q^T and O scratch of large head dims in L2.
FlashTiles default_flash_tiles(int head_dim) {
  if (head_dim >= 256) return {128, 64};
  return {192, 64};
}

void flash_attention(const QueryBlock& q, const KvView& kv, const KeyInterval* intervals, float* out, FlashTiles tiles,
                     const CpuContext& cpu) {
  if (q.batch <= 0 || q.rows <= 0 || q.heads <= 0) return;
  const simd::KernelTable& t = *cpu.table;
  const FlashTiles def = default_flash_tiles(q.head_dim);
  Shape sh{q.heads / kv.kv_heads, q.head_dim, 0, tiles.keys > 0 ? tiles.keys : def.keys};
  const int stacked = tiles.stacked_rows > 0 ? tiles.stacked_rows : def.stacked_rows;
  sh.tile_rows = std::clamp(stacked / sh.group, 1, q.rows);
  ThreadPool& pool = *cpu.pool;
  const int64_t heads_tasks = int64_t(q.batch) * kv.kv_heads;
  // Enough work items for every thread; the result does not depend on the tile height.
  auto count = [&](int rows) { return heads_tasks * ((q.rows + rows - 1) / rows); };
  while (sh.tile_rows > 8 && count(sh.tile_rows) < 2 * pool.size()) sh.tile_rows = (sh.tile_rows + 1) / 2;
  const int tiles_per_seq = (q.rows + sh.tile_rows - 1) / sh.tile_rows;
  const int cols = round_up(sh.tile_rows * sh.group, kLanes);
  pool.parallel_for(heads_tasks * tiles_per_seq, [&](int64_t t0, int64_t t1) {
    TileBuffers buf(sh.hd, cols, sh.tile_rows * sh.group, sh.keys);
    for (int64_t task = t0; task < t1; ++task) {
      // Last query tiles first: under a causal mask they hold the most keys,
      // and the pool hands out ranges in order.
      const int tile = tiles_per_seq - 1 - int(task / heads_tasks);
      const int kvh = int(task % kv.kv_heads), b = int(task / kv.kv_heads % q.batch);
      const int r0 = tile * sh.tile_rows;
      run_tile(t, q, kv, intervals, sh, b, kvh, r0, std::min(q.rows, r0 + sh.tile_rows), buf, out);
    }
  });
}

}  // namespace splitdec
