// Each attention path against a naive pairwise reference on random inputs:
// ring and contiguous KV views, GQA groups, windows, padding, chunks with
// past, rows with no visible key, and odd shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/attention.h"
#include "mask/chunk_mask.h"

using namespace splitdec;

namespace {

struct Problem {
  int batch, rows, heads, kv_heads, head_dim;
  int64_t first;       // position of query row 0
  int64_t slots;       // KV slots
  bool ring;
  std::vector<float> q, k, v;
  std::vector<std::vector<int>> blocks;  // chunk-local ids per sequence
  std::vector<int64_t> seq_start;
  KvView view() const { return {k.data(), v.data(), batch, kv_heads, head_dim, slots, ring}; }
  float softcap = 0.f;
  QueryBlock queries() const { return {q.data(), batch, rows, heads, head_dim, first, 0.37f, softcap}; }
};

Problem random_problem(std::mt19937& rng, int window) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Problem p;
  p.softcap = rng() % 3 == 0 ? 1.5f : 0.f;  // attention logit softcap on some problems
  p.batch = 1 + int(rng() % 3);
  p.rows = 1 + int(rng() % (rng() % 4 == 0 ? 40 : 12));  // several query tiles at times
  p.kv_heads = 1 + int(rng() % 3);
  p.heads = p.kv_heads * (1 + int(rng() % 4));
  p.head_dim = 2 * (1 + int(rng() % 9));  // 2 .. 18
  p.first = int64_t(rng() % 20);
  const int64_t total = p.first + p.rows;
  p.ring = window > 0 && rng() % 2 == 0;
  // A ring must hold the chunk and the window - 1 positions before it.
  p.slots = p.ring ? int64_t(window) + p.rows + int64_t(rng() % 3) : total + int64_t(rng() % 3);
  p.q.resize(size_t(p.batch * p.rows * p.heads * p.head_dim));
  p.k.resize(size_t(p.batch * p.kv_heads * p.slots * p.head_dim));
  p.v.resize(p.k.size());
  for (auto* vec : {&p.q, &p.k, &p.v})
    for (float& x : *vec) x = 3.f * u(rng);
  for (int b = 0; b < p.batch; ++b) {
    p.seq_start.push_back(rng() % 3 == 0 ? int64_t(rng() % (total + 1)) : 0);
    std::vector<int> ids(size_t(p.rows), -1);
    int next = 0;
    for (int r = 0; r < p.rows;) {
      const int len = 1 + int(rng() % 6);
      const bool block = rng() % 2 == 0;
      for (int k = 0; k < len && r < p.rows; ++k, ++r) ids[size_t(r)] = block ? next : -1;
      if (block) ++next;
    }
    p.blocks.push_back(ids);
  }
  return p;
}

// Softmax over the keys `visible` admits, per (b, row, head), from scratch.
template <class Visible>
std::vector<float> naive(const Problem& p, Visible visible) {
  const KvView kv = p.view();
  const int group = p.heads / p.kv_heads;
  std::vector<float> out(p.q.size(), 0.f);
  for (int b = 0; b < p.batch; ++b)
    for (int r = 0; r < p.rows; ++r)
      for (int h = 0; h < p.heads; ++h) {
        const float* q = p.q.data() + ((size_t(b) * p.rows + r) * p.heads + h) * p.head_dim;
        std::vector<double> s;
        std::vector<int64_t> keys;
        for (int64_t j = 0; j < p.first + p.rows; ++j) {
          if (!visible(b, p.first + r, j)) continue;
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d) dot += double(q[d]) * kv.key(b, h / group, j)[d];
          double sc = dot * 0.37;
          if (p.softcap > 0) sc = p.softcap * std::tanh(sc / p.softcap);
          s.push_back(sc);
          keys.push_back(j);
        }
        if (keys.empty()) continue;
        const double m = *std::max_element(s.begin(), s.end());
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - m));
        float* o = out.data() + ((size_t(b) * p.rows + r) * p.heads + h) * p.head_dim;
        for (size_t k = 0; k < keys.size(); ++k)
          for (int d = 0; d < p.head_dim; ++d) o[d] += float(s[k] / l * kv.value(b, h / group, keys[k])[d]);
      }
  return out;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 2e-5f) << what << " at " << k;
}

}  // namespace

TEST(AttentionPaths, MaskedAndDenseBiasMatchPairwiseContract) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 400; ++trial) {
    const int window = rng() % 3 == 0 ? 0 : 1 + int(rng() % 8);
    const Problem p = random_problem(rng, window);
    for (MaskPolicy policy : all_mask_policies())
      for (LayerType type : {LayerType::Sliding, LayerType::Full}) {
        if (type == LayerType::Sliding && window == 0) continue;
        const LayerMaskRule rule = layer_mask_rule(policy, type, window);
        if (p.ring && rule.window == 0) continue;  // rings only back sliding layers
        auto vis = [&](int b, int64_t i, int64_t j) {
          const int bi = p.blocks[size_t(b)][size_t(i - p.first)];
          const int bj = j >= p.first ? p.blocks[size_t(b)][size_t(j - p.first)] : -2;
          return visible(rule, i, j, bi, bj, j < p.seq_start[size_t(b)]);
        };
        const std::vector<float> want = naive(p, vis);
        const ChunkMaskInput in{p.first, p.rows, p.batch, &p.blocks, p.seq_start.data()};
        std::vector<float> got(p.q.size());
        const auto intervals = chunk_row_intervals(rule, in);
        masked_prefill_attention(p.queries(), p.view(), intervals.data(), got.data());
        expect_close(got, want, std::string("masked ") + mask_policy_name(policy));
        if (!p.ring) {
          const auto bias = chunk_dense_bias(rule, in);
          dense_bias_attention(p.queries(), p.view(), bias.data(), got.data());
          expect_close(got, want, std::string("dense-bias ") + mask_policy_name(policy));
        }
      }
  }
}

TEST(AttentionPaths, GqaMatchesCausalWindowReference) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 400; ++trial) {
    const int window = rng() % 3 == 0 ? 0 : 1 + int(rng() % 8);
    const Problem p = random_problem(rng, window);
    auto vis = [&](int b, int64_t i, int64_t j) {
      return j <= i && j >= p.seq_start[size_t(b)] && (window == 0 || j > i - window);
    };
    std::vector<float> got(p.q.size());
    gqa_attention(p.queries(), p.view(), window, p.seq_start.data(), got.data());
    expect_close(got, naive(p, vis), "gqa");
  }
}

TEST(AttentionPaths, RowWithoutVisibleKeyIsZeroNotNan) {
  Problem p;
  p.batch = 1, p.rows = 2, p.heads = 2, p.kv_heads = 1, p.head_dim = 4, p.first = 0, p.slots = 2, p.ring = false;
  p.q.assign(16, 1.f), p.k.assign(8, 1.f), p.v.assign(8, 1.f);
  p.blocks = {{-1, -1}};
  p.seq_start = {2};  // both positions are padding
  std::vector<float> out(16, 7.f);
  gqa_attention(p.queries(), p.view(), 0, p.seq_start.data(), out.data());
  for (float x : out) EXPECT_EQ(x, 0.f);
  const ChunkMaskInput in{0, 2, 1, &p.blocks, p.seq_start.data()};
  const auto iv = chunk_row_intervals(layer_mask_rule(MaskPolicy::Gemma3, LayerType::Full, 0), in);
  std::fill(out.begin(), out.end(), 7.f);
  masked_prefill_attention(p.queries(), p.view(), iv.data(), out.data());
  for (float x : out) EXPECT_EQ(x, 0.f);
  const auto bias = chunk_dense_bias(layer_mask_rule(MaskPolicy::Gemma3, LayerType::Full, 0), in);
  std::fill(out.begin(), out.end(), 7.f);
  dense_bias_attention(p.queries(), p.view(), bias.data(), out.data());
  for (float x : out) EXPECT_EQ(x, 0.f);
}

TEST(AttentionPaths, GqaDecodeSplitsLongContextsAndMerges) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int window : {0, 700}) {
    Problem p;
    p.batch = 1, p.rows = 1, p.kv_heads = 1 + int(rng() % 2), p.head_dim = 64;
    p.heads = p.kv_heads * 2;
    p.first = 3000;
    p.slots = 3001;
    p.ring = false;
    p.q.resize(size_t(p.heads * p.head_dim));
    p.k.resize(size_t(p.kv_heads * p.slots * p.head_dim));
    p.v.resize(p.k.size());
    for (auto* vec : {&p.q, &p.k, &p.v})
      for (float& x : *vec) x = 2.f * u(rng);
    p.blocks = {{-1}};
    p.seq_start = {5};
    auto vis = [&](int, int64_t i, int64_t j) { return j <= i && j >= 5 && (window == 0 || j > i - window); };
    std::vector<float> got(p.q.size());
    gqa_attention(p.queries(), p.view(), window, p.seq_start.data(), got.data());
    expect_close(got, naive(p, vis), "gqa decode split");
  }
}
