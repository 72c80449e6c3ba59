// The three media encoder towers (siglip_tower.h, gemma4_vision_tower.h,
// unified_embedder.h) against their float64 oracle (reference_towers.h), on
// small random weights built here: f32 and bf16 weight formats, square and
// non-square grids, grids off the flash-attention tile sizes (64 keys, 192
// stacked rows), SigLIP's real head_dim 72, grouped KV heads, a single pooled
// token and a single patch, clipped linears and standardization on and off,
// thread counts 1 and 2 (the results must be bit-identical: every row is
// computed by one thread in a fixed order). Plus the error cases.
//
// Tolerance: relative RMS error (|fast - ref|_2 / |ref|_2) below 1e-5, with
// the worst element also within 5e-5 of the output's RMS. The fast path is
// f32 throughout (f32 products and sums in BLAS, f32 online softmax, the
// polynomial exp of GELU within ~1 ulp): each op adds ~1e-7 relative, and the
// norms renormalize every layer, so these 1-2 layer towers end at 1e-7..1e-6
// (the printed lines: at most ~7e-7 rel RMS and ~2e-6 worst element). 1e-5
// leaves >10x headroom and stays far below any real bug (a wrong pooling
// order, RoPE axis, norm convention or a missing clamp moves the output by
// 1e-2..1). Both sides read the same bf16-rounded weights, so the bf16 runs
// have the same budget. That is the exact path's (set_exact_gemm): the fast
// path with bf16 products in the GEMMs has its own, kBf16RelRms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/gemm_bf16.h"
#include "media/reference_towers.h"
#include "test_rng.h"

using namespace splitdec;

namespace {

constexpr double kRelRms = 1e-5;
constexpr double kMaxRel = 5e-5;
// The bf16-products path (each activation rounded to bf16, relative error
// <= 2^-9 per product, mostly cancelling in the sums): measured 0.9e-3 to
// 2.4e-3 on these towers; 1e-2 stays well below the 1e-2..1 of a real bug
// in the layers the GEMM feeds.
constexpr double kBf16RelRms = 1e-2;

using test::Rng;

const char* name(WeightFormat f) { return f == WeightFormat::F32 ? "f32" : "bf16"; }

ImagePatches random_patches(Rng& rng, int rows, int cols, int patch_dim, float lo, float hi) {
  ImagePatches p;
  p.rows = rows, p.cols = cols, p.patch_dim = patch_dim;
  p.data = rng.uniforms(size_t(rows) * cols * patch_dim, lo, hi);
  return p;
}

// Restores the exact switch when a check ends.
struct ExactGemmGuard {
  bool saved = exact_gemm();
  ~ExactGemmGuard() { set_exact_gemm(saved); }
};

// Restores the default pool when a check ends, pass or fail.
struct ThreadsGuard {
  ~ThreadsGuard() { ThreadPool::set_threads(0); }
};

double rms(const std::vector<float>& v) {
  double ss = 0;
  for (float x : v) ss += double(x) * x;
  return std::sqrt(ss / double(std::max<size_t>(1, v.size())));
}

// Relative RMS difference |a - b| / |b|.
double rel_rms(const MediaEmbeddings& a, const MediaEmbeddings& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.data.size(); ++i) {
    const double d = double(a.data[i]) - b.data[i];
    num += d * d, den += double(b.data[i]) * b.data[i];
  }
  return std::sqrt(num / den);
}

// Runs `fast` on 1 and 2 threads (results must be bit-identical) and
// compares it with `ref` within the tolerance above.
// The 1e-5 budget is the exact path's (f32 products): the check runs with
// set_exact_gemm(true). Where bf16 weights may take the AVX512_BF16 GEMM
// (activations rounded to bf16, kernels/gemm_bf16.h), that run follows,
// bit-identical on 1 and 2 threads and within kBf16RelRms of the oracle.
template <class Fast, class Ref>
void expect_matches(const std::string& label, int64_t rows, int width, Fast&& fast, Ref&& ref) {
  ThreadsGuard guard;
  ExactGemmGuard exact;
  set_exact_gemm(true);
  ThreadPool::set_threads(1);
  const MediaEmbeddings one = fast();
  ThreadPool::set_threads(2);
  const MediaEmbeddings two = fast();
  const MediaEmbeddings want = ref();
  if (bf16_gemm_supported()) {
    set_exact_gemm(false);
    const MediaEmbeddings fast_two = fast();
    ThreadPool::set_threads(1);
    const MediaEmbeddings fast_one = fast();
    ASSERT_EQ(fast_one.data.size(), want.data.size()) << label;
    EXPECT_EQ(fast_one.data, fast_two.data) << label << ": bf16 products, 1 and 2 threads differ";
    const double err = rel_rms(fast_one, want);
    std::printf("  %-48s rows %3lld  rel RMS %.2e with bf16 products\n", label.c_str(), (long long)rows, err);
    EXPECT_LT(err, kBf16RelRms) << label << " with bf16 products";
  }
  ASSERT_EQ(one.rows, rows) << label;
  ASSERT_EQ(one.data.size(), size_t(rows) * size_t(width)) << label;
  ASSERT_EQ(want.rows, rows) << label;
  ASSERT_EQ(want.data.size(), one.data.size()) << label;
  EXPECT_EQ(one.data, two.data) << label << ": 1 and 2 threads differ";

  const double scale = rms(want.data);
  ASSERT_GT(scale, 1e-3) << label << ": a degenerate output proves nothing";
  double worst = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    ASSERT_TRUE(std::isfinite(one.data[i])) << label << " element " << i;
    worst = std::max(worst, std::abs(double(one.data[i]) - want.data[i]));
  }
  const double err = rel_rms(one, want);
  std::printf("  %-48s rows %3lld  rel RMS %.2e  max |err| / RMS %.2e\n", label.c_str(), (long long)rows, err, worst / scale);
  EXPECT_LT(err, kRelRms) << label;
  EXPECT_LT(worst / scale, kMaxRel) << label;
}

// Checks that `fn` throws an InputError whose message holds every `parts`.
template <class Fn>
void expect_input_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no InputError thrown";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// ---- SigLIP ----------------------------------------------------------------

SiglipShape siglip_shape(int hidden, int heads, int intermediate, int layers, int image_size, int patch, int pool) {
  SiglipShape s;
  s.hidden = hidden, s.heads = heads, s.head_dim = hidden / heads, s.intermediate = intermediate, s.layers = layers;
  s.image_size = image_size, s.patch = patch, s.pool = pool, s.text_hidden = 24;
  return s;
}

SiglipWeights siglip_weights(const SiglipShape& s, WeightFormat f, uint32_t seed) {
  Rng rng(seed);
  const int H = s.hidden, I = s.intermediate, N = s.grid() * s.grid();
  SiglipWeights w;
  w.patch_embedding = rng.matrix(f, H, s.patch_dim());
  w.patch_bias = rng.normals(size_t(H), 0.1f);
  w.position_embedding = rng.normals(size_t(N) * H, 0.5f);
  for (int i = 0; i < s.layers; ++i) {
    SiglipLayerWeights l;
    l.ln1_weight = rng.normals(size_t(H), 0.1f, 1.f), l.ln1_bias = rng.normals(size_t(H), 0.1f);
    l.ln2_weight = rng.normals(size_t(H), 0.1f, 1.f), l.ln2_bias = rng.normals(size_t(H), 0.1f);
    l.q_proj = rng.matrix(f, H, H), l.k_proj = rng.matrix(f, H, H), l.v_proj = rng.matrix(f, H, H), l.out_proj = rng.matrix(f, H, H);
    l.q_bias = rng.normals(size_t(H), 0.1f), l.k_bias = rng.normals(size_t(H), 0.1f);
    l.v_bias = rng.normals(size_t(H), 0.1f), l.out_bias = rng.normals(size_t(H), 0.1f);
    l.fc1 = rng.matrix(f, I, H), l.fc2 = rng.matrix(f, H, I);
    l.fc1_bias = rng.normals(size_t(I), 0.1f), l.fc2_bias = rng.normals(size_t(H), 0.1f);
    w.layers.push_back(std::move(l));
  }
  w.post_ln_weight = rng.normals(size_t(H), 0.1f, 1.f), w.post_ln_bias = rng.normals(size_t(H), 0.1f);
  w.soft_emb_norm = rng.normals(size_t(H), 0.3f);  // applied as (1 + w)
  w.projection = rng.matrix(f, s.text_hidden, H);
  return w;
}

void check_siglip(const std::string& label, const SiglipShape& s, uint32_t seed) {
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
    const SiglipWeights w = siglip_weights(s, f, seed);
    Rng rng(seed + 1000);
    const ImagePatches p = random_patches(rng, s.grid(), s.grid(), s.patch_dim(), -1.f, 1.f);
    expect_matches(label + " " + name(f), s.tokens(), s.text_hidden, [&] { return siglip_encode(s, w, p); },
                   [&] { return reference_siglip(s, w, p); });
  }
}

TEST(SiglipTower, MatchesReference) {
  // 8 x 8 patches, 2 x 2 pooling: 16 tokens; 2 heads of 16, 2 layers.
  check_siglip("siglip 8x8 pool 2", siglip_shape(32, 2, 64, 2, 16, 2, 2), 1);
}

TEST(SiglipTower, HeadDim72) {
  // SigLIP-So400m's head_dim; 100 keys = one full 64-key tile + 36.
  check_siglip("siglip hd 72, 10x10 pool 5", siglip_shape(144, 2, 96, 1, 20, 2, 5), 2);
}

TEST(SiglipTower, QueryTilesOffTheGrid) {
  // 196 tokens: two query tiles (192 + 4 stacked rows), keys 3 x 64 + 4.
  check_siglip("siglip 14x14 pool 7", siglip_shape(32, 2, 48, 1, 28, 2, 7), 3);
}

TEST(SiglipTower, OnePooledToken) {
  check_siglip("siglip 4x4 pool 4", siglip_shape(32, 4, 32, 2, 8, 2, 4), 4);
}

TEST(SiglipTower, Errors) {
  const SiglipShape s = siglip_shape(32, 2, 64, 1, 16, 2, 2);  // grid 8, patch_dim 12
  const SiglipWeights w = siglip_weights(s, WeightFormat::F32, 5);
  Rng rng(6);
  const ImagePatches wrong_dim = random_patches(rng, 8, 8, 13, -1.f, 1.f);
  expect_input_error([&] { siglip_encode(s, w, wrong_dim); }, {"13", "12"});
  EXPECT_THROW(reference_siglip(s, w, wrong_dim), InputError);

  const ImagePatches wrong_grid = random_patches(rng, 8, 6, 12, -1.f, 1.f);
  expect_input_error([&] { siglip_encode(s, w, wrong_grid); }, {"8 x 6", "8 x 8"});
  EXPECT_THROW(reference_siglip(s, w, wrong_grid), InputError);

  SiglipShape odd = s;
  odd.image_size = 12;  // grid 6, pool 4
  odd.pool = 4;
  const ImagePatches six = random_patches(rng, 6, 6, 12, -1.f, 1.f);
  expect_input_error([&] { siglip_encode(odd, w, six); }, {"6 x 6", "4 x 4"});
  EXPECT_THROW(reference_siglip(odd, w, six), InputError);

  ImagePatches short_buffer = random_patches(rng, 8, 8, 12, -1.f, 1.f);
  short_buffer.data.pop_back();
  expect_input_error([&] { siglip_encode(s, w, short_buffer); }, {"767", "768"});

  // Weights that disagree with the shape: a ConfigError, not a wild read.
  SiglipWeights bad = w;
  bad.layers[0].fc1 = Rng(7).matrix(WeightFormat::F32, 63, 32);
  const ImagePatches ok = random_patches(rng, 8, 8, 12, -1.f, 1.f);
  EXPECT_THROW(siglip_encode(s, bad, ok), ConfigError);
}

// ---- Gemma-4 vision ----------------------------------------------------------

struct Gemma4Options {
  bool clip = false, standardize = false;
};

Gemma4VisionShape gemma4_shape(int hidden, int heads, int kv_heads, int head_dim, int intermediate, int layers, int pool) {
  Gemma4VisionShape s;
  s.hidden = hidden, s.heads = heads, s.kv_heads = kv_heads, s.head_dim = head_dim, s.intermediate = intermediate;
  s.layers = layers, s.patch = 2, s.pool = pool, s.positions = 16, s.text_hidden = 24;
  return s;
}

// Bounds that bind on a good share of the values (activations are ~N(0, 1)
// after the norms), asymmetric so that a swapped min / max shows.
ClippedLinear clipped(WeightMatrix w, bool clip) {
  ClippedLinear c;
  c.weight = std::move(w);
  if (clip) c.clip = ClippedLinear::Bounds{-1.0f, 0.9f, -0.7f, 0.8f};
  return c;
}

Gemma4VisionWeights gemma4_weights(const Gemma4VisionShape& s, WeightFormat f, Gemma4Options o, uint32_t seed) {
  Rng rng(seed);
  const int H = s.hidden, I = s.intermediate, qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  Gemma4VisionWeights w;
  w.input_proj = rng.matrix(f, H, s.patch_dim());
  w.position_table = rng.normals(size_t(2) * s.positions * H, 0.5f);
  for (int i = 0; i < s.layers; ++i) {
    Gemma4VisionLayerWeights l;
    l.q_proj = clipped(rng.matrix(f, qw, H), o.clip), l.k_proj = clipped(rng.matrix(f, kw, H), o.clip);
    l.v_proj = clipped(rng.matrix(f, kw, H), o.clip), l.o_proj = clipped(rng.matrix(f, H, qw), o.clip);
    l.q_norm = rng.normals(size_t(s.head_dim), 0.1f, 0.6f), l.k_norm = rng.normals(size_t(s.head_dim), 0.1f, 0.6f);
    l.input_norm = rng.normals(size_t(H), 0.1f, 1.f), l.post_attention_norm = rng.normals(size_t(H), 0.1f, 1.f);
    l.pre_feedforward_norm = rng.normals(size_t(H), 0.1f, 1.f), l.post_feedforward_norm = rng.normals(size_t(H), 0.1f, 1.f);
    l.gate_proj = clipped(rng.matrix(f, I, H), o.clip), l.up_proj = clipped(rng.matrix(f, I, H), o.clip);
    l.down_proj = clipped(rng.matrix(f, H, I), o.clip);
    w.layers.push_back(std::move(l));
  }
  if (o.standardize) {
    w.std_bias = rng.normals(size_t(H), 1.f);
    w.std_scale = rng.uniforms(size_t(H), 0.5f, 1.5f);
  }
  w.embedding_projection = rng.matrix(f, s.text_hidden, H);
  return w;
}

void check_gemma4(const std::string& label, Gemma4VisionShape s, int rows, int cols, Gemma4Options o, uint32_t seed) {
  s.standardize = o.standardize;
  for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
    const Gemma4VisionWeights w = gemma4_weights(s, f, o, seed);
    Rng rng(seed + 1000);
    const ImagePatches p = random_patches(rng, rows, cols, s.patch_dim(), 0.f, 1.f);
    const std::string tag = label + (o.clip ? " clip" : "") + (o.standardize ? " std" : "") + " " + name(f);
    expect_matches(tag, int64_t(rows / s.pool) * (cols / s.pool), s.text_hidden, [&] { return gemma4_vision_encode(s, w, p); },
                   [&] { return reference_gemma4_vision(s, w, p); });
  }
}

TEST(Gemma4VisionTower, MatchesReferenceNonSquare) {
  // 6 rows x 9 cols with 3 x 3 pooling: 2 x 3 tokens.
  const Gemma4VisionShape s = gemma4_shape(32, 2, 2, 16, 64, 2, 3);
  for (bool clip : {false, true})
    for (bool standardize : {false, true}) check_gemma4("gemma4 6x9 pool 3", s, 6, 9, {clip, standardize}, 10);
}

TEST(Gemma4VisionTower, GroupedKvHeadsTallGrid) {
  // 4 query heads on 2 KV heads, q width 64 != hidden 32; 12 rows x 3 cols.
  check_gemma4("gemma4 gqa 12x3 pool 3", gemma4_shape(32, 4, 2, 16, 48, 2, 3), 12, 3, {true, false}, 11);
}

TEST(Gemma4VisionTower, HeadDim72) {
  // The large models' head_dim; 108 keys: 64 + 44.
  check_gemma4("gemma4 hd 72, 9x12 pool 3", gemma4_shape(144, 2, 2, 72, 96, 1, 3), 9, 12, {false, true}, 12);
}

TEST(Gemma4VisionTower, OnePooledTokenAndOnePatch) {
  check_gemma4("gemma4 3x3 pool 3", gemma4_shape(32, 2, 2, 16, 64, 2, 3), 3, 3, {true, true}, 13);
  // One patch, no pooling: the attention's single-row path.
  check_gemma4("gemma4 1x1 pool 1", gemma4_shape(32, 2, 2, 16, 64, 2, 1), 1, 1, {false, false}, 14);
}

TEST(Gemma4VisionTower, ClipBoundsAndStandardizeMatter) {
  // The oracle sees the options (a test that passes whatever the clamp does proves nothing),
  // and infinite bounds (the loader's default for a missing scalar) clamp nothing.
  Gemma4VisionShape s = gemma4_shape(32, 2, 2, 16, 64, 2, 3);
  Rng rng(20);
  const ImagePatches p = random_patches(rng, 6, 9, s.patch_dim(), 0.f, 1.f);
  const Gemma4VisionWeights plain = gemma4_weights(s, WeightFormat::F32, {false, false}, 21);
  const Gemma4VisionWeights clip = gemma4_weights(s, WeightFormat::F32, {true, false}, 21);
  EXPECT_GT(rel_rms(reference_gemma4_vision(s, clip, p), reference_gemma4_vision(s, plain, p)), 0.05);

  Gemma4VisionWeights unbounded = plain;
  const float inf = std::numeric_limits<float>::infinity();
  for (Gemma4VisionLayerWeights& l : unbounded.layers)
    for (ClippedLinear* c : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      c->clip = ClippedLinear::Bounds{-inf, inf, -inf, inf};
  EXPECT_EQ(gemma4_vision_encode(s, unbounded, p).data, gemma4_vision_encode(s, plain, p).data);

  Gemma4VisionWeights standardized = gemma4_weights(s, WeightFormat::F32, {false, true}, 21);
  Gemma4VisionShape st = s;
  st.standardize = true;
  EXPECT_GT(rel_rms(reference_gemma4_vision(st, standardized, p), reference_gemma4_vision(s, plain, p)), 0.05);
}

TEST(Gemma4VisionTower, Errors) {
  const Gemma4VisionShape s = gemma4_shape(32, 2, 2, 16, 64, 1, 3);  // patch_dim 12, 16 positions
  const Gemma4VisionWeights w = gemma4_weights(s, WeightFormat::F32, {}, 30);
  Rng rng(31);
  const ImagePatches not_pooled = random_patches(rng, 7, 9, 12, 0.f, 1.f);
  expect_input_error([&] { gemma4_vision_encode(s, w, not_pooled); }, {"7 x 9", "3"});
  EXPECT_THROW(reference_gemma4_vision(s, w, not_pooled), InputError);

  const ImagePatches wrong_dim = random_patches(rng, 6, 9, 48, 0.f, 1.f);
  expect_input_error([&] { gemma4_vision_encode(s, w, wrong_dim); }, {"48", "12"});
  EXPECT_THROW(reference_gemma4_vision(s, w, wrong_dim), InputError);

  const ImagePatches too_wide = random_patches(rng, 3, 18, 12, 0.f, 1.f);  // 18 columns, 16 positions
  expect_input_error([&] { gemma4_vision_encode(s, w, too_wide); }, {"3 x 18", "16"});
  EXPECT_THROW(reference_gemma4_vision(s, w, too_wide), InputError);

  const ImagePatches none;
  expect_input_error([&] { gemma4_vision_encode(s, w, none); }, {"0 x 0"});
}

// ---- gemma4_unified ------------------------------------------------------------

UnifiedVisionShape unified_shape() {
  UnifiedVisionShape s;
  s.patch = 4, s.embed_dim = 40, s.positions = 8, s.text_hidden = 24;  // patch_dim 48
  return s;
}

UnifiedVisionWeights unified_weights(const UnifiedVisionShape& s, WeightFormat f, uint32_t seed) {
  Rng rng(seed);
  const int P = s.patch_dim(), D = s.embed_dim;
  UnifiedVisionWeights w;
  w.ln1_weight = rng.normals(size_t(P), 0.1f, 1.f), w.ln1_bias = rng.normals(size_t(P), 0.1f);
  w.dense = rng.matrix(f, D, P);
  w.dense_bias = rng.normals(size_t(D), 0.3f);
  w.ln2_weight = rng.normals(size_t(D), 0.1f, 1.f), w.ln2_bias = rng.normals(size_t(D), 0.1f);
  w.pos_embedding = rng.normals(size_t(s.positions) * 2 * D, 0.5f);
  w.pos_norm_weight = rng.normals(size_t(D), 0.1f, 1.f), w.pos_norm_bias = rng.normals(size_t(D), 0.1f);
  w.projection = rng.matrix(f, s.text_hidden, D);
  return w;
}

TEST(UnifiedImageEmbedder, MatchesReference) {
  const UnifiedVisionShape s = unified_shape();
  // Non-square, a single patch, and the full 8 x 8 position table (rows >= 16: the GEMM path).
  for (auto [rows, cols] : {std::pair{3, 5}, std::pair{1, 1}, std::pair{8, 8}})
    for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
      const UnifiedVisionWeights w = unified_weights(s, f, 40);
      Rng rng(41);
      const ImagePatches p = random_patches(rng, rows, cols, s.patch_dim(), 0.f, 1.f);
      expect_matches("unified " + std::to_string(rows) + "x" + std::to_string(cols) + " " + name(f), int64_t(rows) * cols,
                     s.text_hidden, [&] { return unified_image_encode(s, w, p); }, [&] { return reference_unified_image(s, w, p); });
    }
}

TEST(UnifiedImageEmbedder, Errors) {
  const UnifiedVisionShape s = unified_shape();
  const UnifiedVisionWeights w = unified_weights(s, WeightFormat::F32, 42);
  Rng rng(43);
  const ImagePatches wrong_dim = random_patches(rng, 2, 2, 12, 0.f, 1.f);
  expect_input_error([&] { unified_image_encode(s, w, wrong_dim); }, {"12", "48"});
  EXPECT_THROW(reference_unified_image(s, w, wrong_dim), InputError);

  const ImagePatches too_tall = random_patches(rng, 9, 2, 48, 0.f, 1.f);  // row 8 has no table entry
  expect_input_error([&] { unified_image_encode(s, w, too_tall); }, {"9 x 2", "8"});
  EXPECT_THROW(reference_unified_image(s, w, too_tall), InputError);
}

UnifiedAudioShape audio_shape() {
  UnifiedAudioShape s;
  s.frame = 16, s.text_hidden = 24;
  return s;
}

TEST(UnifiedAudioEmbedder, MatchesReference) {
  const UnifiedAudioShape s = audio_shape();
  // 50 samples: 3 full frames + 2 samples zero-padded; 48: exactly 3; 1: one frame; 400: the GEMM path.
  for (int samples : {50, 48, 1, 400})
    for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
      Rng rng(uint32_t(50 + samples));
      const WeightMatrix projection = rng.matrix(f, s.text_hidden, s.frame);
      AudioClip clip;
      clip.samples = rng.uniforms(size_t(samples), -0.5f, 0.5f);
      expect_matches("audio " + std::to_string(samples) + " samples " + name(f), (samples + 15) / 16, s.text_hidden,
                     [&] { return unified_audio_encode(s, projection, clip); },
                     [&] { return reference_unified_audio(s, projection, clip); });
    }
}

TEST(UnifiedAudioEmbedder, HandComputedFrames) {
  // Frames of 4 through an identity projection: [3, 4, 0, 0] has RMS 2.5, the
  // padded [1, 0, 0, 0] has RMS 0.5.
  UnifiedAudioShape s;
  s.frame = 4, s.text_hidden = 4;
  const float eye[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  const WeightMatrix identity = WeightMatrix::from_f32(WeightFormat::F32, 4, 4, eye);
  AudioClip clip;
  clip.samples = {3, 4, 0, 0, 1};
  const std::vector<float> want = {1.2f, 1.6f, 0, 0, 2, 0, 0, 0};
  for (const MediaEmbeddings& e : {unified_audio_encode(s, identity, clip), reference_unified_audio(s, identity, clip)}) {
    ASSERT_EQ(e.rows, 2);
    ASSERT_EQ(e.data.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(e.data[i], want[i], 1e-5) << i;
  }
}

TEST(UnifiedAudioEmbedder, Errors) {
  const UnifiedAudioShape s = audio_shape();
  const WeightMatrix projection = Rng(60).matrix(WeightFormat::F32, s.text_hidden, s.frame);
  const AudioClip empty;
  expect_input_error([&] { unified_audio_encode(s, projection, empty); }, {"empty"});
  EXPECT_THROW(reference_unified_audio(s, projection, empty), InputError);

  AudioClip slow;
  slow.sample_rate = 8000;
  slow.samples.assign(100, 0.1f);
  expect_input_error([&] { unified_audio_encode(s, projection, slow); }, {"8000", "16000"});

  // A projection whose input is not the frame size is the model's fault.
  const WeightMatrix wrong = Rng(61).matrix(WeightFormat::F32, s.text_hidden, 15);
  AudioClip clip;
  clip.samples.assign(40, 0.1f);
  EXPECT_THROW(unified_audio_encode(s, wrong, clip), ConfigError);
}

}  // namespace
