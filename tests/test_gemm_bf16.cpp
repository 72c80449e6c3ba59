// The AVX512_BF16 prefill GEMM (kernels/gemm_bf16.h) against its naive
// reference on edge shapes, and how linear() routes to it. Skipped where
// the CPU lacks AVX512_BF16 or SPLITDEC_SIMD picks another table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "generate/generator.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/reference_gemm_bf16.h"
#include "kernels/reference_ops.h"
#include "kernels/simd/kernel_table.h"
#include "pipeline/session.h"
#include "test_prompts.h"
#include "test_support.h"

using namespace splitdec;

namespace {

std::vector<float> random_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& f : v) f = d(rng);
  return v;
}

// Restores the exact switch a test changes.
struct ExactGemmScope {
  bool saved = exact_gemm();
  explicit ExactGemmScope(bool exact) { set_exact_gemm(exact); }
  ~ExactGemmScope() { set_exact_gemm(saved); }
};

// Kernel and reference each sum the same exact products in f32, in orders
// that may differ (the hardware's pairing is not the reference's promise),
// so each is within gamma_in = in * 2^-24 of sum |products| of the true sum.
float tolerance(const float* x, const uint16_t* w, int in) {
  double sum_abs = 0;
  for (int k = 0; k < in; ++k) sum_abs += std::abs(double(bf16_to_f32(f32_to_bf16(x[k]))) * double(bf16_to_f32(w[k])));
  return float(2.0 * in * std::ldexp(1.0, -24) * sum_abs * 1.01);
}

// Compares gemm_bf16 with the reference on one shape, weights stored as
// `format`; returns how many results were bit-identical.
int64_t expect_matches_reference(std::mt19937& rng, int rows, int out, int in, WeightFormat format = WeightFormat::BF16) {
  SCOPED_TRACE(std::string(weight_format_name(format)) + " rows " + std::to_string(rows) + " out " + std::to_string(out) + " in " +
               std::to_string(in));
  const auto wf = random_vec(rng, size_t(out) * size_t(in));
  const WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
  const std::vector<uint16_t> wb = ref::bf16_weights(w);
  const auto x = random_vec(rng, size_t(rows) * size_t(in));
  std::vector<float> want(size_t(rows) * size_t(out)), got(want.size(), NAN);
  ref::linear_bf16_products(x.data(), rows, in, wb.data(), out, want.data());
  gemm_bf16(x.data(), rows, w, got.data());
  int64_t same = 0;
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      const size_t k = size_t(r) * size_t(out) + size_t(o);
      const float tol = tolerance(x.data() + size_t(r) * size_t(in), wb.data() + size_t(o) * size_t(in), in);
      EXPECT_NEAR(got[k], want[k], tol) << "row " << r << " output " << o;
      same += got[k] == want[k];
    }
  return same;
}

}  // namespace

TEST(GemmBf16, MatchesTheNaiveReferenceOnEdgeShapes) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(3);
  int64_t same = 0, all = 0;
  // Every row count of the 12-row tiles and their tails, on strips of 32
  // and 16 outputs with masked edges, in not a multiple of 32, in odd.
  for (int rows = 1; rows <= 33; ++rows)
    for (auto [out, in] : {std::pair{17, 33}, {48, 64}, {45, 7}}) {
      same += expect_matches_reference(rng, rows, out, in);
      all += int64_t(rows) * out;
    }
  // Shapes: one output, several panels (300: panels of 64), a panel edge
  // inside a strip, k blocks of 512 and a short last one, in = 0, 1 and 2.
  for (int rows : {1, 5, 16, 21})
    for (auto [out, in] : {std::pair{5, 0}, {1, 1}, {1, 2}, {16, 31}, {31, 129}, {33, 96}, {70, 513}, {300, 96}, {129, 1031}, {260, 1536}}) {
      same += expect_matches_reference(rng, rows, out, in);
      all += int64_t(rows) * out;
    }
  std::printf("bit-identical to the reference's order: %lld of %lld\n", (long long)same, (long long)all);
}

// f16, Q8_0 and Q4_0 weights are rounded to bf16 as they are packed: the
// reference multiplies ref::bf16_weights (each stored value expanded
// exactly, then rounded). Blocks take in % 32 == 0 only; f16 also odd in.
TEST(GemmBf16, TakesF16AndBlockWeightsRoundedToBf16) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(6);
  for (WeightFormat f : {WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    EXPECT_TRUE(bf16_gemm_takes(f));
    // One block, a k block of 512 and one block past it, several panels,
    // strips of 32 and 16 with masked edges.
    for (int rows : {1, 7, 12, 13, 25})
      for (auto [out, in] : {std::pair{1, 32}, {17, 64}, {48, 544}, {300, 96}, {33, 1056}})
        expect_matches_reference(rng, rows, out, in, f);
  }
  for (auto [out, in] : {std::pair{5, 7}, {31, 129}, {70, 513}}) expect_matches_reference(rng, 9, out, in, WeightFormat::F16);
  EXPECT_FALSE(bf16_gemm_takes(WeightFormat::F32));
}

// A block's scale d multiplies all of its values before they are rounded:
// weights of very different magnitudes in one row (a tiny block beside a
// huge one) each keep bf16's relative precision.
TEST(GemmBf16, BlockScalesApplyBeforeRounding) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(7);
  const int out = 20, in = 128, rows = 13;
  auto wf = random_vec(rng, size_t(out) * size_t(in));
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; ++k) wf[size_t(o) * in + k] *= k < 32 ? 1e-4f : k < 64 ? 3e3f : 1.f;
  const auto x = random_vec(rng, size_t(rows) * size_t(in));
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    const WeightMatrix w = WeightMatrix::from_f32(f, out, in, wf.data());
    std::vector<float> exact(size_t(rows) * size_t(out)), got(exact.size());
    std::vector<float> wd(size_t(out) * size_t(in));
    for (int o = 0; o < out; ++o) w.row_f32(o, wd.data() + size_t(o) * in);
    ref::linear(x.data(), rows, in, wd.data(), out, exact.data());
    gemm_bf16(x.data(), rows, w, got.data());
    for (int r = 0; r < rows; ++r)
      for (int o = 0; o < out; ++o) {
        double bound = 0;  // each product off by at most 2^-8 of itself (two roundings of 2^-9)
        for (int k = 0; k < in; ++k) bound += std::abs(double(x[size_t(r) * in + k]) * wd[size_t(o) * in + k]);
        const size_t i = size_t(r) * out + size_t(o);
        ASSERT_NEAR(got[i], exact[i], std::ldexp(bound, -8)) << weight_format_name(f) << " row " << r << " output " << o;
      }
  }
}

// The sums depend on neither the thread count nor the other rows: a row
// gives the same bits alone in a block of 16 or inside a bigger one.
TEST(GemmBf16, ResultsDependOnNeitherThreadsNorOtherRows) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(4);
  const int out = 600, in = 1152, rows = 40;
  const auto wf = random_vec(rng, size_t(out) * size_t(in));
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::BF16, out, in, wf.data());
  const auto x = random_vec(rng, size_t(rows) * size_t(in));
  std::vector<float> two(size_t(rows) * size_t(out)), one(two.size()), part(size_t(16) * size_t(out));
  ThreadPool::set_threads(2);
  gemm_bf16(x.data(), rows, w, two.data());
  ThreadPool::set_threads(1);
  gemm_bf16(x.data(), rows, w, one.data());
  ThreadPool::set_threads(0);
  EXPECT_EQ(one, two);
  gemm_bf16(x.data() + size_t(7) * size_t(in), 16, w, part.data());  // rows 7..22
  for (size_t k = 0; k < part.size(); ++k) ASSERT_EQ(part[k], two[size_t(7) * size_t(out) + k]) << k;
}

// The decode matvec with bf16 products against the reference, on bf16 and
// f16 weights (f16 rounded to bf16, ref::bf16_weights): rows 1-9 (groups
// of four and their rests), one and two weight streams (odd and even
// output counts), `in` around the 64-value step and its 16-pair rest, odd
// `in`. With an odd `in` every odd output's first weight is Inf: a tail
// that read one value past an even output's row would make it NaN.
TEST(GemmBf16, MatvecMatchesTheNaiveReference) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(9);
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::F16})
    for (int rows = 1; rows <= 9; ++rows)
      for (int out : {1, 2, 3, 17, 34})
        for (int in : {1, 2, 31, 32, 33, 63, 64, 65, 97, 129, 1152}) {
          SCOPED_TRACE(std::string(weight_format_name(format)) + " rows " + std::to_string(rows) + " out " + std::to_string(out) +
                       " in " + std::to_string(in));
          const auto wf = random_vec(rng, size_t(out) * size_t(in));
          WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
          const bool guarded = in % 2 == 1;
          const uint16_t inf = format == WeightFormat::BF16 ? 0x7f80 : 0x7c00;
          if (guarded)
            for (int o = 1; o < out; o += 2) std::memcpy(const_cast<uint8_t*>(w.row(o)), &inf, 2);
          const std::vector<uint16_t> wb = ref::bf16_weights(w);
          const auto x = random_vec(rng, size_t(rows) * size_t(in));
          std::vector<float> want(size_t(rows) * size_t(out)), got(want.size(), NAN);
          ref::linear_bf16_products(x.data(), rows, in, wb.data(), out, want.data());
          matvec_bf16(x.data(), rows, w, got.data());
          for (int r = 0; r < rows; ++r)
            for (int o = 0; o < out; o += guarded ? 2 : 1) {
              const size_t k = size_t(r) * size_t(out) + size_t(o);
              ASSERT_NEAR(got[k], want[k], tolerance(x.data() + size_t(r) * in, wb.data() + size_t(o) * in, in))
                  << "row " << r << " output " << o;
            }
        }
}

// A sequence's decode bits do not depend on the batch: each row alone
// gives the bits it has among 11 rows, on one thread or two.
TEST(GemmBf16, MatvecRowsGetTheirBitsAloneOrBatched) {
  if (!bf16_gemm_supported()) GTEST_SKIP() << "no AVX512_BF16 (or SPLITDEC_SIMD chose another table)";
  std::mt19937 rng(10);
  const int out = 301, rows = 11;
  for (WeightFormat format : {WeightFormat::BF16, WeightFormat::F16}) {
    for (int in : {1152, 1185}) {  // whole steps only, and a tail with an odd pair
      SCOPED_TRACE(std::string(weight_format_name(format)) + " in " + std::to_string(in));
      const auto wf = random_vec(rng, size_t(out) * size_t(in));
      const WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
      const auto x = random_vec(rng, size_t(rows) * size_t(in));
      std::vector<float> two(size_t(rows) * size_t(out)), one(two.size()), alone(static_cast<size_t>(out));
      ThreadPool::set_threads(1);
      matvec_bf16(x.data(), rows, w, one.data());
      ThreadPool::set_threads(0);
      matvec_bf16(x.data(), rows, w, two.data());
      EXPECT_EQ(one, two);
      for (int r = 0; r < rows; ++r) {
        matvec_bf16(x.data() + size_t(r) * in, 1, w, alone.data());
        for (int o = 0; o < out; ++o) ASSERT_EQ(alone[size_t(o)], two[size_t(r) * out + size_t(o)]) << "row " << r << " output " << o;
      }
    }
  }
}

// linear() takes the GEMM for bf16 weights from kGemmRows rows and the
// bf16-products matvec below, unless exact: then it stays within f32
// rounding of the f32 reference on the bf16 weight values, as every other
// kernel does. Runs on every CPU.
TEST(GemmBf16, LinearTakesItForBf16PrefillUnlessExact) {
  std::mt19937 rng(5);
  const int out = 200, in = 300;
  auto wf = random_vec(rng, size_t(out) * size_t(in));
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::BF16, out, in, wf.data());
  for (float& v : wf) v = bf16_to_f32(f32_to_bf16(v));
  for (int rows : {kGemmRows - 1, kGemmRows, 33}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const auto x = random_vec(rng, size_t(rows) * size_t(in));
    std::vector<float> exact(size_t(rows) * size_t(out)), fast(exact.size()), kernel(exact.size()), want(exact.size());
    ref::linear(x.data(), rows, in, wf.data(), out, want.data());
    {
      ExactGemmScope scope(true);
      EXPECT_FALSE(bf16_gemm_enabled());
      linear(x.data(), rows, w, exact.data());
    }
    for (size_t k = 0; k < exact.size(); ++k) ASSERT_NEAR(exact[k], want[k], 2e-5f * in) << k;
    ExactGemmScope scope(false);
    EXPECT_EQ(bf16_gemm_enabled(), bf16_gemm_supported());
    linear(x.data(), rows, w, fast.data());
    if (!bf16_gemm_supported()) {
      EXPECT_EQ(fast, exact);
      continue;
    }
    if (rows < kGemmRows) matvec_bf16(x.data(), rows, w, kernel.data());
    else gemm_bf16(x.data(), rows, w, kernel.data());
    EXPECT_EQ(fast, kernel);
    // bf16-rounded activations: each product off by at most 2^-8 of itself.
    for (size_t k = 0; k < fast.size(); ++k) ASSERT_NEAR(fast[k], want[k], std::ldexp(1.f, -8) * in) << k;
  }
}

// Decode on f16 weights takes the bf16-products matvec too (unless exact),
// within the bf16 bound of the f32 reference on the f16 values.
TEST(GemmBf16, LinearTakesTheMatvecForF16DecodeUnlessExact) {
  std::mt19937 rng(11);
  const int out = 70, in = 300, rows = 5;
  auto wf = random_vec(rng, size_t(out) * size_t(in));
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::F16, out, in, wf.data());
  for (int o = 0; o < out; ++o) w.row_f32(o, wf.data() + size_t(o) * in);  // the f16 values
  const auto x = random_vec(rng, size_t(rows) * size_t(in));
  std::vector<float> exact(size_t(rows) * size_t(out)), fast(exact.size()), kernel(exact.size()), want(exact.size());
  ref::linear(x.data(), rows, in, wf.data(), out, want.data());
  {
    ExactGemmScope scope(true);
    linear(x.data(), rows, w, exact.data());
  }
  for (size_t k = 0; k < exact.size(); ++k) ASSERT_NEAR(exact[k], want[k], 2e-5f * in) << k;
  ExactGemmScope scope(false);
  linear(x.data(), rows, w, fast.data());
  if (!bf16_gemm_supported()) {
    EXPECT_EQ(fast, exact);
    return;
  }
  EXPECT_NE(fast, exact);
  matvec_bf16(x.data(), rows, w, kernel.data());
  EXPECT_EQ(fast, kernel);
  {  // the reference plan's thread stays exact
    ExactGemmOnThisThread reference;
    std::vector<float> on_reference_thread(exact.size());
    linear(x.data(), rows, w, on_reference_thread.data());
    EXPECT_EQ(on_reference_thread, exact);
  }
  // rows_independent with a prefill's row count: the matvec too.
  const int many = kGemmRows + 1;
  const auto xm = random_vec(rng, size_t(many) * size_t(in));
  std::vector<float> independent(size_t(many) * size_t(out)), by_matvec(independent.size());
  linear(xm.data(), many, w, independent.data(), /*rows_independent=*/true);
  matvec_bf16(xm.data(), many, w, by_matvec.data());
  EXPECT_EQ(independent, by_matvec);
  // Both sides rounded to bf16: each product off by at most 2^-7 of itself.
  for (size_t k = 0; k < fast.size(); ++k) ASSERT_NEAR(fast[k], want[k], std::ldexp(1.f, -7) * in) << k;
}

// linear() sends prefill GEMMs on Q8_0 and Q4_0 weights (int8 activations
// in the decode kernels) to the bf16 kernel too, on the same q8_0
// activations expanded back; exact, they stay on the f32 GEMM of those.
// The reference plan's thread is exact whatever the switch says.
TEST(GemmBf16, LinearTakesItForBlockPrefillUnlessExact) {
  std::mt19937 rng(8);
  const int out = 100, in = 256, rows = 21;
  const auto wf = random_vec(rng, size_t(out) * size_t(in));
  const auto x = random_vec(rng, size_t(rows) * size_t(in));
  std::vector<float> xd(x.size()), scales(x.size() / 32);
  std::vector<int8_t> q(x.size());
  for (int r = 0; r < rows; ++r)
    simd::best().quantize_q8_activations(x.data() + size_t(r) * in, in, 32, scales.data() + size_t(r) * (in / 32), q.data() + size_t(r) * in);
  for (size_t i = 0; i < xd.size(); ++i) xd[i] = scales[i / 32] * float(q[i]);
  for (WeightFormat f : {WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    WeightMatrix w = WeightMatrix::from_f32(f, out, in, wf.data());
    w.int8_activations = true;
    std::vector<float> exact(size_t(rows) * size_t(out)), fast(exact.size()), on_reference(exact.size()), kernel(exact.size());
    {
      ExactGemmScope scope(true);
      linear(x.data(), rows, w, exact.data());
    }
    ExactGemmScope scope(false);
    linear(x.data(), rows, w, fast.data());
    {
      const ExactGemmOnThisThread reference;
      EXPECT_FALSE(bf16_gemm_enabled());
      linear(x.data(), rows, w, on_reference.data());
    }
    EXPECT_EQ(on_reference, exact) << weight_format_name(f);
    if (!bf16_gemm_supported()) {
      EXPECT_EQ(fast, exact);
      continue;
    }
    EXPECT_TRUE(bf16_gemm_enabled());
    gemm_bf16(xd.data(), rows, w, kernel.data());
    EXPECT_EQ(fast, kernel) << weight_format_name(f);
    EXPECT_NE(fast, exact) << weight_format_name(f);
  }
}

// Every plan shares the linear layers and hands them the same rows, so
// with bf16 products on (a bf16 tiny model, chunks of 64: the prompt's 59
// rows take the GEMM) the plans still produce the same tokens. single's
// logits move further from split's than on the exact path (rel RMS 5.7e-4
// against 2.3e-6; max 1.2e-2 against 1.6e-5): its dense-bias attention
// differs from the masked one in f32 rounding, and where that moves an
// activation across a bf16 rounding boundary its products move by 2^-9.
// The bound is the deviation the bf16 products may cost (bench bf16_gemm:
// 6.8e-3 against the exact path on gemma3-1b), relative RMS 1e-2.
TEST(GemmBf16, PlansAgreeWithBf16Products) {
  const Model m = Model::load(test::tiny_model_dir("tiny-gemma4", 0, "bf16"));
  ASSERT_EQ(m.weights().layers[0].up_proj.format, WeightFormat::BF16);
  test::SeqBuilder s(m.config(), 12);
  s.text(20).media(Modality::Image, 16).text(20);
  const PromptBatch p = test::batch_of({s}, m.config().pad_token_id);
  ExactGemmScope scope(false);
  const Plan kPlans[] = {Plan::Split, Plan::Single, Plan::SplitCopy, Plan::Unified};
  std::vector<GenerationResult> results;
  for (Plan plan : kPlans) {
    SessionOptions o;
    o.capacity = 96;
    o.chunk = 64;
    o.plan = plan;
    Session session(m, 1, o);
    results.push_back(generate_greedy(session, {{p, 8}}));
  }
  for (size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[i].tokens, results[0].tokens) << "plan " << i;
    const std::vector<float>&a = results[i].prompt_logits, &b = results[0].prompt_logits;
    ASSERT_EQ(a.size(), b.size());
    double err = 0, scale = 0;
    for (size_t k = 0; k < a.size(); ++k) err += double(a[k] - b[k]) * (a[k] - b[k]), scale += double(b[k]) * b[k];
    std::printf("plan %s: prompt logits %.2e rel RMS from plan split\n", plan_name(kPlans[i]), std::sqrt(err / scale));
    EXPECT_LT(std::sqrt(err / scale), 1e-2) << "plan " << i;
  }
}
