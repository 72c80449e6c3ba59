// The flash-attention tiles (kernels/flash_attention.h) against a float64
// loop over each row's interval, on every SIMD table this machine runs, over
// the shapes where tiling goes wrong: rows and keys off the tile grid, blocks
// crossing tile edges, windows narrower than a tile, rows with no visible key,
// rings that wrap inside a tile, batches, GQA groups of 1..8, head_dim 1..256,
// f32 / bf16 / f16 KV and the logit softcap. Also: the result does not depend
// on the thread count or the tile height, and the table primitives agree
// with the scalar table.
//
// Tolerance: the output is a weighted mean of value rows, so each element is
// compared to 1e-5 of mag = sum_j p_j |v_j[d]| (the size of what is being
// averaged; a plain relative bound would be meaningless where the mean
// cancels to ~0) plus 1e-6. The f32 error budget: score dot products of up
// to 256 terms (~1e-7 of sum |q_d k_d| scale, well under 1e-5 at these
// magnitudes), the vector exp (~2e-7 relative) and the vector tanh of the
// softcap (~1e-7 absolute per logit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/flash_attention.h"
#include "kernels/simd/kernel_table.h"
#include "mask/chunk_mask.h"

using namespace splitdec;

namespace {

enum class Kv { F32, BF16, F16 };

struct Problem {
  int batch = 1, rows = 1, heads = 1, kv_heads = 1, head_dim = 1;
  int64_t first = 0, slots = 0;
  bool ring = false;
  Kv kv_type = Kv::F32;
  float scale = 1.f, softcap = 0.f;
  std::vector<float> q, k, v;
  std::vector<uint16_t> k16, v16;
  std::vector<KeyInterval> intervals;  // [batch * rows]

  KvView view() const {
    if (kv_type == Kv::F32) return {k.data(), v.data(), batch, kv_heads, head_dim, slots, ring};
    return {nullptr, nullptr, batch, kv_heads, head_dim, slots, ring, k16.data(), v16.data(), kv_type == Kv::F16};
  }
  QueryBlock queries() const { return {q.data(), batch, rows, heads, head_dim, first, scale, softcap}; }
};

// Reference: float64 softmax over each row's interval, reading K/V through
// KvView (so 16-bit storage is compared on the values it holds). mag: the
// tolerance scale described above.
void reference(const Problem& p, std::vector<float>& out, std::vector<float>& mag) {
  const KvView kv = p.view();
  const int hd = p.head_dim, group = p.heads / p.kv_heads;
  out.assign(p.q.size(), 0.f);
  mag.assign(p.q.size(), 0.f);
  auto kr = std::vector<float>(size_t(hd)), vr = std::vector<float>(size_t(hd));
  for (int b = 0; b < p.batch; ++b)
    for (int r = 0; r < p.rows; ++r) {
      const KeyInterval iv = p.intervals[size_t(b * p.rows + r)];
      for (int h = 0; h < p.heads; ++h) {
        const size_t at = ((size_t(b) * p.rows + r) * p.heads + h) * hd;
        std::vector<double> s;
        for (int64_t j = iv.begin; j < iv.end; ++j) {
          kv.key_f32(b, h / group, j, kr.data());
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += double(p.q[at + d]) * kr[size_t(d)];
          double sc = dot * p.scale;
          if (p.softcap > 0) sc = p.softcap * std::tanh(sc / p.softcap);
          s.push_back(sc);
        }
        if (s.empty()) continue;
        const double m = *std::max_element(s.begin(), s.end());
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - m));
        auto o = std::vector<double>(size_t(hd), 0.0), a = std::vector<double>(size_t(hd), 0.0);
        for (int64_t j = iv.begin; j < iv.end; ++j) {
          kv.value_f32(b, h / group, j, vr.data());
          const double w = s[size_t(j - iv.begin)] / l;
          for (int d = 0; d < hd; ++d) o[size_t(d)] += w * vr[size_t(d)], a[size_t(d)] += w * std::fabs(vr[size_t(d)]);
        }
        for (int d = 0; d < hd; ++d) out[at + size_t(d)] = float(o[size_t(d)]), mag[at + size_t(d)] = float(a[size_t(d)]);
      }
    }
}

void expect_matches(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& mag,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t x = 0; x < got.size(); ++x) {
    ASSERT_FALSE(std::isnan(got[x])) << what << " at " << x;
    ASSERT_LE(std::fabs(got[x] - want[x]), 1e-5f * mag[x] + 1e-6f) << what << " at " << x << ": " << got[x] << " vs " << want[x];
  }
}

struct Spec {
  int batch, rows, kv_heads, group, head_dim;
  int64_t first;
  int window;     // 0: none
  bool ring;      // needs window > 0
  bool blocks;    // bidirectional blocks (gemma3 rule)
  bool padding;   // left padding, some rows see nothing
  bool random_intervals;  // arbitrary intervals inside what the KV holds
  Kv kv_type;
  float softcap;
};

Problem make_problem(const Spec& sp, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Problem p;
  p.batch = sp.batch, p.rows = sp.rows, p.kv_heads = sp.kv_heads, p.heads = sp.kv_heads * sp.group, p.head_dim = sp.head_dim;
  p.first = sp.first, p.ring = sp.ring, p.kv_type = sp.kv_type, p.softcap = sp.softcap;
  p.scale = 1.f / std::sqrt(float(sp.head_dim));
  const int64_t total = p.first + p.rows;
  // A ring holds the chunk and the window - 1 positions before it.
  p.slots = p.ring ? int64_t(sp.window) + p.rows + int64_t(rng() % 5) : total + int64_t(rng() % 3);
  p.q.resize(size_t(p.batch) * p.rows * p.heads * p.head_dim);
  for (float& x : p.q) x = 2.f * u(rng);
  const size_t kv_n = size_t(p.batch) * p.kv_heads * size_t(p.slots) * p.head_dim;
  p.k.resize(kv_n), p.v.resize(kv_n);
  for (float& x : p.k) x = 2.f * u(rng);
  for (float& x : p.v) x = 3.f * u(rng);
  if (p.kv_type != Kv::F32) {
    for (float x : p.k) p.k16.push_back(p.kv_type == Kv::F16 ? f32_to_f16(x) : f32_to_bf16(x));
    for (float x : p.v) p.v16.push_back(p.kv_type == Kv::F16 ? f32_to_f16(x) : f32_to_bf16(x));
    p.k.clear(), p.v.clear();
  }
  const int64_t held_from = p.ring ? std::max<int64_t>(0, total - p.slots) : 0;  // the oldest position the KV still holds
  if (sp.random_intervals) {
    for (int b = 0; b < p.batch; ++b)
      for (int r = 0; r < p.rows; ++r) {
        const int64_t span = total - held_from;
        int64_t a = held_from + int64_t(rng() % uint64_t(span)), e = held_from + int64_t(rng() % uint64_t(span + 1));
        if (rng() % 6 == 0) e = a;  // empty
        if (e < a) std::swap(a, e);
        p.intervals.push_back({a, e});
      }
    return p;
  }
  std::vector<std::vector<int>> blocks;
  std::vector<int64_t> start;
  for (int b = 0; b < p.batch; ++b) {
    std::vector<int> ids(size_t(p.rows), -1);
    if (sp.blocks) {
      int next = 0;
      for (int r = 0; r < p.rows;) {
        const int len = 1 + int(rng() % 80);  // up to several query tiles
        const bool block = rng() % 2 == 0;
        for (int k = 0; k < len && r < p.rows; ++k, ++r) ids[size_t(r)] = block ? next : -1;
        if (block) ++next;
      }
    }
    blocks.push_back(ids);
    start.push_back(sp.padding ? int64_t(rng() % uint64_t(total + 1)) : 0);
  }
  const LayerMaskRule rule = sp.blocks ? layer_mask_rule(MaskPolicy::Gemma3, sp.window ? LayerType::Sliding : LayerType::Full, sp.window)
                                       : layer_mask_rule(MaskPolicy::Causal, sp.window ? LayerType::Sliding : LayerType::Full, sp.window);
  p.intervals = chunk_row_intervals(rule, ChunkMaskInput{p.first, p.rows, p.batch, &blocks, start.data()});
  return p;
}

Spec random_spec(std::mt19937& rng) {
  Spec s{};
  static const int dims[] = {1, 2, 3, 16, 17, 32, 64, 100, 128, 256};
  static const int groups[] = {1, 2, 4, 8};
  s.head_dim = dims[rng() % 10];
  s.group = groups[rng() % 4];
  s.kv_heads = 1 + int(rng() % 2);
  s.batch = 1 + int(rng() % 2);
  const int big = s.head_dim >= 128 ? 90 : 200;  // keep the float64 reference quick
  s.rows = 2 + int(rng() % uint32_t(rng() % 3 == 0 ? big : 40));
  s.first = rng() % 2 ? int64_t(rng() % 150) : 0;
  s.window = rng() % 2 ? 0 : 1 + int(rng() % 100);  // often narrower than a key tile
  s.ring = s.window > 0 && rng() % 2 == 0;
  s.blocks = rng() % 2 == 0;
  s.padding = rng() % 3 == 0;
  s.random_intervals = rng() % 6 == 0;
  s.kv_type = Kv(rng() % 3);
  s.softcap = rng() % 4 == 0 ? 2.5f : 0.f;
  return s;
}

std::string describe(const Spec& s, const simd::KernelTable& t, FlashTiles tiles) {
  return std::string(t.name) + " b" + std::to_string(s.batch) + " rows" + std::to_string(s.rows) + " kvh" + std::to_string(s.kv_heads) +
         " g" + std::to_string(s.group) + " hd" + std::to_string(s.head_dim) + " first" + std::to_string(s.first) + " w" +
         std::to_string(s.window) + (s.ring ? " ring" : "") + (s.blocks ? " blocks" : "") + (s.padding ? " pad" : "") +
         (s.random_intervals ? " random-iv" : "") + " kv" + std::to_string(int(s.kv_type)) + " cap" + std::to_string(s.softcap) +
         " tiles " + std::to_string(tiles.stacked_rows) + "x" + std::to_string(tiles.keys);
}

}  // namespace

TEST(FlashAttention, MatchesFloat64ReferenceOnEveryTable) {
  std::mt19937 rng(1234);
  const FlashTiles tilings[] = {{}, {16, 16}, {32, 48}, {8, 7}};
  for (int trial = 0; trial < 120; ++trial) {
    const Spec sp = random_spec(rng);
    const Problem p = make_problem(sp, rng);
    std::vector<float> want, mag, got(p.q.size());
    reference(p, want, mag);
    for (const simd::KernelTable* t : simd::available()) {
      const FlashTiles tiles = tilings[rng() % 4];
      std::fill(got.begin(), got.end(), 7.f);
      flash_attention(p.queries(), p.view(), p.intervals.data(), got.data(), tiles, CpuContext::with_table(*t));
      expect_matches(got, want, mag, describe(sp, *t, tiles));
    }
  }
}

TEST(FlashAttention, EdgeShapesOnEveryTable) {
  std::mt19937 rng(77);
  std::vector<Spec> specs;
  for (int hd : {1, 16, 64, 256})
    for (int group : {1, 2, 4, 8}) {
      // Rows off the tile grid, a block crossing query and key tile edges, a ring that wraps.
      specs.push_back({2, 67, 1, group, hd, 5, 0, false, true, false, false, Kv::F32, 0.f});
      specs.push_back({1, 45, 2, group, hd, 90, 9, true, true, true, false, Kv::BF16, 0.f});
      specs.push_back({1, 33, 1, group, hd, 0, 0, false, false, true, false, Kv::F16, 3.f});
    }
  for (const Spec& sp : specs) {
    const Problem p = make_problem(sp, rng);
    std::vector<float> want, mag, got(p.q.size());
    reference(p, want, mag);
    for (const simd::KernelTable* t : simd::available())
      for (FlashTiles tiles : {FlashTiles{}, FlashTiles{16, 16}}) {
        std::fill(got.begin(), got.end(), 7.f);
        flash_attention(p.queries(), p.view(), p.intervals.data(), got.data(), tiles, CpuContext::with_table(*t));
        expect_matches(got, want, mag, describe(sp, *t, tiles));
      }
  }
}

TEST(FlashAttention, RowsWithoutVisibleKeysAreZero) {
  std::mt19937 rng(5);
  Spec sp{1, 40, 1, 2, 16, 0, 0, false, false, false, false, Kv::F32, 0.f};
  Problem p = make_problem(sp, rng);
  for (int r = 0; r < 40; ++r)
    if (r < 25 || r % 3 == 0) p.intervals[size_t(r)] = {r, r};  // padding rows, and gaps between visible rows
  std::vector<float> want, mag, got(p.q.size());
  reference(p, want, mag);
  for (const simd::KernelTable* t : simd::available()) {
    std::fill(got.begin(), got.end(), 7.f);
    flash_attention(p.queries(), p.view(), p.intervals.data(), got.data(), FlashTiles{16, 16}, CpuContext::with_table(*t));
    expect_matches(got, want, mag, t->name);
    for (int r = 0; r < 25; ++r)
      for (int x = 0; x < 2 * 16; ++x) EXPECT_EQ(got[size_t(r * 32 + x)], 0.f);
  }
  for (KeyInterval& iv : p.intervals) iv = {3, 3};  // nothing visible at all
  flash_attention(p.queries(), p.view(), p.intervals.data(), got.data());
  for (float x : got) EXPECT_EQ(x, 0.f);
}

// Each row is one work item's, over key tiles aligned to absolute positions:
// neither the thread count nor the tile height may change a bit.
TEST(FlashAttention, DeterministicAcrossThreadsAndTileHeights) {
  std::mt19937 rng(99);
  Spec sp{2, 150, 2, 2, 64, 37, 50, false, true, true, false, Kv::F32, 0.f};
  const Problem p = make_problem(sp, rng);
  std::vector<float> base(p.q.size()), got(p.q.size());
  ThreadPool::set_threads(1);
  flash_attention(p.queries(), p.view(), p.intervals.data(), base.data(), FlashTiles{128, 64});
  for (int threads : {2, 3}) {
    ThreadPool::set_threads(threads);
    for (int stacked : {128, 48, 16, 2}) {
      flash_attention(p.queries(), p.view(), p.intervals.data(), got.data(), FlashTiles{stacked, 64});
      for (size_t x = 0; x < got.size(); ++x) ASSERT_EQ(got[x], base[x]) << threads << " threads, " << stacked << " rows at " << x;
    }
  }
  ThreadPool::set_threads(0);
}

// The paths that route to the tiles agree with the rowwise kernel they
// replaced, through their public entries.
TEST(FlashAttention, MaskedAndGqaEntriesAgreeWithRowwiseKernel) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    Spec sp = random_spec(rng);
    sp.random_intervals = false;
    const Problem p = make_problem(sp, rng);
    std::vector<float> want, mag, got(p.q.size()), old(p.q.size());
    reference(p, want, mag);
    masked_prefill_attention(p.queries(), p.view(), p.intervals.data(), got.data());
    expect_matches(got, want, mag, "masked " + describe(sp, simd::best(), {}));
    rowwise_prefill_attention(p.queries(), p.view(), p.intervals.data(), old.data());
    expect_matches(old, want, mag, "rowwise " + describe(sp, simd::best(), {}));
  }
  // gqa_attention builds causal + window + start intervals itself.
  for (int trial = 0; trial < 20; ++trial) {
    Spec sp = random_spec(rng);
    sp.blocks = false, sp.random_intervals = false;
    Problem p = make_problem(sp, rng);
    auto start = std::vector<int64_t>(size_t(p.batch));
    for (int b = 0; b < p.batch; ++b) start[size_t(b)] = sp.padding ? int64_t(rng() % uint64_t(p.first + p.rows)) : 0;
    for (int b = 0; b < p.batch; ++b)
      for (int r = 0; r < p.rows; ++r) {
        const int64_t i = p.first + r;
        const int64_t lo = std::max(start[size_t(b)], sp.window ? i - sp.window + 1 : int64_t(0));
        p.intervals[size_t(b * p.rows + r)] = {lo, i + 1};
      }
    std::vector<float> want, mag, got(p.q.size());
    reference(p, want, mag);
    gqa_attention(p.queries(), p.view(), sp.window, start.data(), got.data());
    expect_matches(got, want, mag, "gqa " + describe(sp, simd::best(), {}));
  }
}

// The two table primitives against the scalar table, on odd sizes and both A layouts.
TEST(FlashAttention, TablePrimitivesAgreeWithScalar) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const simd::KernelTable& ref = simd::generic_table();
  for (const simd::KernelTable* t : simd::available())
    for (int trial = 0; trial < 60; ++trial) {
      const int m = 1 + int(rng() % 40), n = 1 + int(rng() % 70), k = int(rng() % 50);
      const bool col_major = rng() % 2;
      const int64_t lda = col_major ? m + int64_t(rng() % 3) : k + int64_t(rng() % 3), ldb = n + int64_t(rng() % 3), ldc = n + 1;
      auto a = std::vector<float>(size_t(col_major ? std::max(k, 1) * lda : m * lda)), b = std::vector<float>(size_t(std::max(k, 1) * ldb)),
           c1 = std::vector<float>(size_t(m * ldc)), scale = std::vector<float>(size_t(m));
      for (auto* vec : {&a, &b, &c1, &scale})
        for (float& x : *vec) x = u(rng);
      std::vector<float> c2 = c1;
      const float* cs = rng() % 2 ? scale.data() : nullptr;
      t->gemm_f32(m, n, k, a.data(), col_major ? 1 : lda, col_major ? lda : 1, b.data(), ldb, c1.data(), ldc, cs);
      ref.gemm_f32(m, n, k, a.data(), col_major ? 1 : lda, col_major ? lda : 1, b.data(), ldb, c2.data(), ldc, cs);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) ASSERT_NEAR(c1[size_t(i * ldc + j)], c2[size_t(i * ldc + j)], 1e-5f * (1 + k)) << t->name;

      // Softmax step on a tile with some columns already holding state.
      const int cols = 16 * (1 + int(rng() % 3)), keys = 1 + int(rng() % 40);
      auto s1 = std::vector<float>(size_t(keys * cols)), mx1 = std::vector<float>(size_t(cols)), l1 = mx1, c_1 = mx1;
      auto lo = std::vector<int32_t>(size_t(cols)), hi = lo;
      for (float& x : s1) x = 4.f * u(rng);
      for (int i = 0; i < cols; ++i) {
        lo[size_t(i)] = int32_t(rng() % 30), hi[size_t(i)] = lo[size_t(i)] + int32_t(rng() % 30);
        const bool seen = rng() % 2;
        mx1[size_t(i)] = seen ? u(rng) : -std::numeric_limits<float>::infinity();
        l1[size_t(i)] = seen ? 1.f + u(rng) * 0.5f : 0.f;
      }
      std::vector<float> s2 = s1, mx2 = mx1, l2 = l1, c_2 = c_1;
      const bool masked = rng() % 4 != 0;
      const float cap = rng() % 3 == 0 ? 1.7f : 0.f;
      t->flash_softmax(s1.data(), cols, keys, cols, 3, lo.data(), hi.data(), masked, cap, mx1.data(), l1.data(), c_1.data());
      ref.flash_softmax(s2.data(), cols, keys, cols, 3, lo.data(), hi.data(), masked, cap, mx2.data(), l2.data(), c_2.data());
      for (size_t x = 0; x < s1.size(); ++x) ASSERT_NEAR(s1[x], s2[x], 1e-6f) << t->name;
      for (int i = 0; i < cols; ++i) {
        if (std::isinf(mx2[size_t(i)])) ASSERT_EQ(mx1[size_t(i)], mx2[size_t(i)]) << t->name;
        else ASSERT_NEAR(mx1[size_t(i)], mx2[size_t(i)], 1e-6f) << t->name;
        ASSERT_NEAR(l1[size_t(i)], l2[size_t(i)], 1e-5f * (1 + l2[size_t(i)])) << t->name;
        ASSERT_NEAR(c_1[size_t(i)], c_2[size_t(i)], 1e-6f) << t->name;
      }
    }
}
