// Every SIMD table this CPU can run against the scalar table for every weight
// format, and the linear layer (decode and BLAS paths, f32, bf16 and f16
// weights) against ref::linear, on random inputs including odd sizes.
#include <bit>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/row_kernels.h"
#include "kernels/reference_ops.h"
#include "kernels/simd/kernel_table.h"
#include "kv/kv_rows.h"

using namespace splitdec;

namespace {
std::vector<float> random_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}
std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t k = 0; k < v.size(); ++k) h[k] = f32_to_bf16(v[k]);
  return h;
}
std::vector<uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t k = 0; k < v.size(); ++k) h[k] = f32_to_f16(v[k]);
  return h;
}
}  // namespace

TEST(SimdTables, AgreeWithScalarOnOddSizes) {
  std::mt19937 rng(3);
  const simd::KernelTable& ref = simd::generic_table();
  ASSERT_GE(simd::available().size(), 1u);
  for (const simd::KernelTable* t : simd::available()) {
    SCOPED_TRACE(t->name);
    for (int n : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257}) {
      const auto a = random_vec(rng, size_t(n)), b = random_vec(rng, size_t(n));
      const auto hb = to_bf16(b);
      const float tol = 1e-5f * float(n + 1);
      EXPECT_NEAR(t->dot_f32(a.data(), b.data(), n), ref.dot_f32(a.data(), b.data(), n), tol);
      EXPECT_NEAR(t->dot_bf16(a.data(), hb.data(), n), ref.dot_bf16(a.data(), hb.data(), n), tol);
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < 4; ++r) xs.push_back(random_vec(rng, size_t(n)));
      const float* xp[4] = {xs[0].data(), xs[1].data(), xs[2].data(), xs[3].data()};
      float got[4], want[4];
      t->dot4_f32(xp, b.data(), n, got);
      ref.dot4_f32(xp, b.data(), n, want);
      for (int r = 0; r < 4; ++r) EXPECT_NEAR(got[r], want[r], tol);
      t->dot4_bf16(xp, hb.data(), n, got);
      ref.dot4_bf16(xp, hb.data(), n, want);
      for (int r = 0; r < 4; ++r) EXPECT_NEAR(got[r], want[r], tol);
      const auto hf = to_f16(b);
      EXPECT_NEAR(t->dot_f16(a.data(), hf.data(), n), ref.dot_f16(a.data(), hf.data(), n), tol);
      t->dot4_f16(xp, hf.data(), n, got);
      ref.dot4_f16(xp, hf.data(), n, want);
      for (int r = 0; r < 4; ++r) EXPECT_NEAR(got[r], want[r], tol);
      // Row expansion is exact in every table.
      std::vector<float> e1(static_cast<size_t>(n)), e2(static_cast<size_t>(n));
      t->expand_bf16(hb.data(), n, e1.data());
      ref.expand_bf16(hb.data(), n, e2.data());
      EXPECT_EQ(e1, e2);
      for (int k = 0; k < n; ++k) EXPECT_EQ(e1[size_t(k)], bf16_to_f32(hb[size_t(k)]));
      t->expand_f16(hf.data(), n, e1.data());
      ref.expand_f16(hf.data(), n, e2.data());
      EXPECT_EQ(e1, e2);
      for (int k = 0; k < n; ++k) EXPECT_EQ(e1[size_t(k)], f16_to_f32(hf[size_t(k)]));
      auto y1 = random_vec(rng, size_t(n));
      auto y2 = y1;
      t->scale_axpy(y1.data(), 0.7f, -1.3f, a.data(), n);
      ref.scale_axpy(y2.data(), 0.7f, -1.3f, a.data(), n);
      for (int k = 0; k < n; ++k) EXPECT_NEAR(y1[size_t(k)], y2[size_t(k)], 1e-6f);
      EXPECT_NEAR(t->sum_f32(a.data(), n), ref.sum_f32(a.data(), n), tol);
    }
  }
}

// dot2 (two weight rows against one x, the single-row decode matvec) gives
// each row exactly dot's bits, so a sequence's logits do not depend on
// whether its matvec ran through dot2, dot4 (batched) or dot.
TEST(SimdTables, Dot2GivesEachRowDotsBits) {
  std::mt19937 rng(11);
  for (const simd::KernelTable* t : simd::available()) {
    SCOPED_TRACE(t->name);
    for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 257, 1152, 4096}) {
      const auto x = random_vec(rng, size_t(n)), w0 = random_vec(rng, size_t(n)), w1 = random_vec(rng, size_t(n));
      float got[2];
      t->dot2_f32(x.data(), w0.data(), w1.data(), n, got);
      EXPECT_EQ(got[0], t->dot_f32(x.data(), w0.data(), n)) << "f32 n " << n;
      EXPECT_EQ(got[1], t->dot_f32(x.data(), w1.data(), n)) << "f32 n " << n;
      const auto b0 = to_bf16(w0), b1 = to_bf16(w1);
      t->dot2_bf16(x.data(), b0.data(), b1.data(), n, got);
      EXPECT_EQ(got[0], t->dot_bf16(x.data(), b0.data(), n)) << "bf16 n " << n;
      EXPECT_EQ(got[1], t->dot_bf16(x.data(), b1.data(), n)) << "bf16 n " << n;
      const auto h0 = to_f16(w0), h1 = to_f16(w1);
      t->dot2_f16(x.data(), h0.data(), h1.data(), n, got);
      EXPECT_EQ(got[0], t->dot_f16(x.data(), h0.data(), n)) << "f16 n " << n;
      EXPECT_EQ(got[1], t->dot_f16(x.data(), h1.data(), n)) << "f16 n " << n;
    }
  }
}

// dot4x2 (four x rows against two weight rows, the batched decode matvec)
// gives each pair exactly dot's bits too, so a sequence's logits do not
// depend on how many sequences share its decode step.
TEST(SimdTables, Dot4x2GivesEachPairDotsBits) {
  std::mt19937 rng(12);
  for (const simd::KernelTable* t : simd::available()) {
    SCOPED_TRACE(t->name);
    for (int n : {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 257, 1152, 4096}) {
      std::vector<std::vector<float>> x;
      for (int r = 0; r < 4; ++r) x.push_back(random_vec(rng, size_t(n)));
      const float* xp[4] = {x[0].data(), x[1].data(), x[2].data(), x[3].data()};
      const auto w0 = random_vec(rng, size_t(n)), w1 = random_vec(rng, size_t(n));
      float got[8];
      t->dot4x2_f32(xp, w0.data(), w1.data(), n, got);
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(got[r], t->dot_f32(xp[r], w0.data(), n)) << "f32 n " << n << " row " << r;
        EXPECT_EQ(got[4 + r], t->dot_f32(xp[r], w1.data(), n)) << "f32 n " << n << " row " << r;
      }
      const auto b0 = to_bf16(w0), b1 = to_bf16(w1);
      t->dot4x2_bf16(xp, b0.data(), b1.data(), n, got);
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(got[r], t->dot_bf16(xp[r], b0.data(), n)) << "bf16 n " << n << " row " << r;
        EXPECT_EQ(got[4 + r], t->dot_bf16(xp[r], b1.data(), n)) << "bf16 n " << n << " row " << r;
      }
      const auto h0 = to_f16(w0), h1 = to_f16(w1);
      t->dot4x2_f16(xp, h0.data(), h1.data(), n, got);
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(got[r], t->dot_f16(xp[r], h0.data(), n)) << "f16 n " << n << " row " << r;
        EXPECT_EQ(got[4 + r], t->dot_f16(xp[r], h1.data(), n)) << "f16 n " << n << " row " << r;
      }
    }
  }
}

TEST(SimdTables, AttendKeysAgreesWithScalarOnlineSoftmax) {
  std::mt19937 rng(11);
  const simd::KernelTable& ref = simd::generic_table();
  for (const simd::KernelTable* t : simd::available())
    // n: block edges of both tables (8 / 16 keys), the 4-key score tiles and
    // the prefetch distance (1 KiB); group: head pairs and an odd last
    // head; hd: vector tails and the 4-vector value tiles.
    for (int n : {0, 1, 5, 15, 16, 17, 40, 63, 64, 65, 100, 129})
      for (int group : {1, 2, 3, 4, 8})
        for (int hd : {2, 18, 64, 72, 136, 256})
        for (float cap : {0.f, 2.5f}) {
          const auto q = random_vec(rng, size_t(group * hd)), k = random_vec(rng, size_t(n * hd)), v = random_vec(rng, size_t(n * hd));
          // Start from a state that already holds some keys.
          std::vector<float> m1(size_t(group), 0.3f), l1(size_t(group), 1.5f), a1 = random_vec(rng, size_t(group * hd));
          auto m2 = m1, l2 = l1, a2 = a1;
          t->attend_keys(q.data(), group, hd, 1.7f, cap, k.data(), v.data(), n, m1.data(), l1.data(), a1.data());
          ref.attend_keys(q.data(), group, hd, 1.7f, cap, k.data(), v.data(), n, m2.data(), l2.data(), a2.data());
          // Compare normalised outputs (the running max may differ in when it moved).
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < hd; ++d)
              ASSERT_NEAR(a1[size_t(g * hd + d)] / l1[size_t(g)], a2[size_t(g * hd + d)] / l2[size_t(g)], 2e-5f)
                  << t->name << " n " << n << " group " << group << " hd " << hd;
          // bf16 keys and values: the same math on the rounded values.
          const auto k16 = to_bf16(k), v16 = to_bf16(v);
          std::vector<float> kr(k.size()), vr(v.size());
          for (size_t x = 0; x < k.size(); ++x) kr[x] = bf16_to_f32(k16[x]), vr[x] = bf16_to_f32(v16[x]);
          auto m3 = m2, l3 = l2, a3 = a2, m4 = m2, l4 = l2, a4 = a2;
          t->attend_keys_bf16(q.data(), group, hd, 1.7f, cap, k16.data(), v16.data(), n, m3.data(), l3.data(), a3.data());
          ref.attend_keys(q.data(), group, hd, 1.7f, cap, kr.data(), vr.data(), n, m4.data(), l4.data(), a4.data());
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < hd; ++d)
              ASSERT_NEAR(a3[size_t(g * hd + d)] / l3[size_t(g)], a4[size_t(g * hd + d)] / l4[size_t(g)], 2e-5f)
                  << t->name << " bf16 n " << n << " group " << group << " hd " << hd;
          // f16 likewise.
          std::vector<uint16_t> kh(k.size()), vh(v.size());
          for (size_t x = 0; x < k.size(); ++x) kh[x] = f32_to_f16(k[x]), vh[x] = f32_to_f16(v[x]), kr[x] = f16_to_f32(kh[x]), vr[x] = f16_to_f32(vh[x]);
          auto m5 = m2, l5 = l2, a5 = a2, m6 = m2, l6 = l2, a6 = a2;
          t->attend_keys_f16(q.data(), group, hd, 1.7f, cap, kh.data(), vh.data(), n, m5.data(), l5.data(), a5.data());
          ref.attend_keys(q.data(), group, hd, 1.7f, cap, kr.data(), vr.data(), n, m6.data(), l6.data(), a6.data());
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < hd; ++d)
              ASSERT_NEAR(a5[size_t(g * hd + d)] / l5[size_t(g)], a6[size_t(g * hd + d)] / l6[size_t(g)], 2e-5f)
                  << t->name << " f16 n " << n << " group " << group << " hd " << hd;
          // q8 keys and values (one scale per row): the same math on the dequantized values.
          std::vector<int8_t> k8(k.size()), v8(v.size());
          std::vector<float> ks(static_cast<size_t>(n)), vs(static_cast<size_t>(n));
          for (int j = 0; j < n; ++j) {
            ks[size_t(j)] = quantize_kv_row(k.data() + j * hd, hd, k8.data() + j * hd);
            vs[size_t(j)] = quantize_kv_row(v.data() + j * hd, hd, v8.data() + j * hd);
          }
          for (size_t x = 0; x < k.size(); ++x) kr[x] = ks[x / size_t(hd)] * float(k8[x]), vr[x] = vs[x / size_t(hd)] * float(v8[x]);
          auto m7 = m2, l7 = l2, a7 = a2, m8 = m2, l8 = l2, a8 = a2;
          t->attend_keys_q8(q.data(), group, hd, 1.7f, cap, k8.data(), ks.data(), v8.data(), vs.data(), n, m7.data(), l7.data(), a7.data());
          ref.attend_keys(q.data(), group, hd, 1.7f, cap, kr.data(), vr.data(), n, m8.data(), l8.data(), a8.data());
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < hd; ++d)
              ASSERT_NEAR(a7[size_t(g * hd + d)] / l7[size_t(g)], a8[size_t(g * hd + d)] / l8[size_t(g)], 2e-5f)
                  << t->name << " q8 n " << n << " group " << group << " hd " << hd;
          std::vector<float> e(k.size());
          t->expand_q8_rows(k8.data(), ks.data(), n, hd, e.data());
          for (size_t x = 0; x < k.size(); ++x) ASSERT_EQ(e[x], kr[x]) << t->name;
        }
}

// A q8 KV row: within half a step of the input, the largest value exact in
// magnitude, zero rows zero, NaN kept (it must reach the output as in f32),
// and round_trip_kv_row gives what a q8 cache hands back.
TEST(KvRows, Q8RowsQuantizeWithinHalfAStep) {
  std::mt19937 rng(31);
  for (int hd : {1, 7, 64, 256}) {
    std::vector<float> x = random_vec(rng, size_t(hd)), back(static_cast<size_t>(hd));
    std::vector<int8_t> q(static_cast<size_t>(hd));
    const float s = quantize_kv_row(x.data(), hd, q.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::abs(v));
    EXPECT_FLOAT_EQ(s, amax / 127.f);
    round_trip_kv_row(DType::I8, x.data(), hd, back.data());
    for (int d = 0; d < hd; ++d) {
      EXPECT_LE(std::abs(s * float(q[size_t(d)]) - x[size_t(d)]), 0.5f * s * (1 + 1e-5f)) << d;
      EXPECT_EQ(back[size_t(d)], s * float(q[size_t(d)]));
    }
  }
  std::vector<float> zero(8, 0.f), nan(8, 1.f);
  std::vector<int8_t> q(8);
  EXPECT_EQ(quantize_kv_row(zero.data(), 8, q.data()), 0.f);
  nan[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(quantize_kv_row(nan.data(), 8, q.data())));
  EXPECT_EQ(kv_storage_dtype(parse_kv_storage("q8")), DType::I8);
  EXPECT_THROW(parse_kv_storage("q4"), InputError);
}

// Weight rows start on cache lines (a 64-byte load across two lines costs
// two), whatever the allocation size; so does an AlignedVector's data.
TEST(Linear, WeightStorageIsCacheLineAligned) {
  for (int out : {1, 3, 1000})
    for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::Q8_0}) {
      const WeightMatrix w = WeightMatrix::zeros(f, out, 64);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data.data()) % kCacheLine, 0u);
      if (weight_row_bytes(f, 64) % kCacheLine == 0) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(w.row(out - 1)) % kCacheLine, 0u);
      }
    }
  for (size_t n : {size_t(1), size_t(5), size_t(1) << 20}) {
    AlignedVector<float> v(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kCacheLine, 0u);
    v.resize(3 * n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kCacheLine, 0u);
  }
}

// A row's output through the decode kernels does not depend on how many
// rows share the call (batch sizes that take dot2, dot4x2, dot4 and the
// pairing rule for x rows past L1), bit for bit, on every table.
TEST(Linear, EachRowOfABatchGetsItsSoloBits) {
  std::mt19937 rng(6);
  for (WeightFormat format : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16})
    // 2051: x rows of 8+ past the 48 KiB L1 rule (AVX-512 pairs them), and
    // vector and scalar tails on every table.
    for (int in : {64, 2051}) {
      const int out = 37;  // odd: a thread's range ends with an unpaired row
      const auto wf = random_vec(rng, size_t(out) * size_t(in));
      const WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
      for (int rows : {2, 4, 5, 7, 8, 9, 12, 15}) {
        const auto x = random_vec(rng, size_t(rows) * size_t(in));
        for (const simd::KernelTable* t : simd::available()) {
          SCOPED_TRACE(std::string(t->name) + " " + weight_format_name(format) + " in " + std::to_string(in) + " rows " +
                       std::to_string(rows));
          std::vector<float> batch(size_t(rows) * size_t(out)), solo(static_cast<size_t>(out));
          linear_with(*t, x.data(), rows, w, batch.data());
          for (int r = 0; r < rows; ++r) {
            linear_with(*t, x.data() + size_t(r) * size_t(in), 1, w, solo.data());
            for (int o = 0; o < out; ++o) ASSERT_EQ(batch[size_t(r) * size_t(out) + size_t(o)], solo[size_t(o)]) << "row " << r;
          }
        }
      }
    }
}

// Many small matrices in one dispatch (a token's experts) give each output
// linear_with's bits: every format, int8 activations on and off, odd output
// counts, jobs of different widths and row counts, a job of one output.
TEST(Linear, BatchOfSmallMatricesGivesEachItsSoloBits) {
  std::mt19937 rng(9);
  for (WeightFormat format : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0})
    for (bool int8 : {false, true}) {
      struct Shape { int out, in, rows; };
      const std::vector<Shape> shapes = {{37, 64, 1}, {1, 96, 3}, {130, 2048, 2}, {64, 160, 5}, {3, 32, 1}};
      std::vector<WeightMatrix> ws;
      std::vector<std::vector<float>> xs, got;
      for (const Shape& sh : shapes) {
        const auto wf = random_vec(rng, size_t(sh.out) * size_t(sh.in));
        ws.push_back(WeightMatrix::from_f32(format, sh.out, sh.in, wf.data()));
        ws.back().int8_activations = int8;
        xs.push_back(random_vec(rng, size_t(sh.rows) * size_t(sh.in)));
        got.emplace_back(size_t(sh.rows) * size_t(sh.out));
      }
      std::vector<LinearJob> jobs;
      for (size_t j = 0; j < shapes.size(); ++j) jobs.push_back({xs[j].data(), shapes[j].rows, &ws[j], got[j].data()});
      linear_batch(jobs.data(), int(jobs.size()));
      for (size_t j = 0; j < shapes.size(); ++j) {
        std::vector<float> want(got[j].size());
        linear_with(simd::best(), xs[j].data(), shapes[j].rows, ws[j], want.data());
        EXPECT_EQ(got[j], want) << weight_format_name(format) << (int8 ? " int8" : "") << " job " << j;
      }
    }
}

// linear() runs on the CpuContext it is given (a backend call's): its
// table's kernels, whatever the process default is, on its pool (a private
// one here: exercised, not observed, since no result depends on the
// threads). Decode rows (rows_independent): f32, bf16 and f16 rows give that
// table's own dot product bit for bit (the tables sum in different orders,
// so another table's would differ); a context on another table than the
// best one never takes the bf16 products. Row groups with int8 activations
// give the scalar table's grouped bits on every table (simd/row_groups.h).
TEST(Linear, RunsOnTheTableAndPoolOfItsContext) {
  std::mt19937 rng(12);
  const auto pool = std::make_shared<ThreadPool>(3);
  for (WeightFormat format : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0}) {
    const bool grouped = format == WeightFormat::Q8_0 || format == WeightFormat::Q4_0;
    const int out = grouped ? 64 : 70, in = 256;  // whole groups; an odd count for the float rows' pairing
    const auto wf = random_vec(rng, size_t(out) * size_t(in));
    WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
    if (grouped) {
      w.int8_activations = true;
      w.group_rows();
      ASSERT_EQ(w.grouped_rows, 64);
    }
    for (int rows : {1, 3, 5}) {
      const auto x = random_vec(rng, size_t(rows) * size_t(in));
      std::vector<float> scalar(size_t(rows) * size_t(out));
      if (grouped) linear_with(*simd::available().front(), x.data(), rows, w, scalar.data());
      for (const simd::KernelTable* t : simd::available()) {
        SCOPED_TRACE(std::string(t->name) + " " + weight_format_name(format) + " rows " + std::to_string(rows));
        // bf16 products are the best table's alone (tested in test_gemm_bf16).
        if (!grouped && format != WeightFormat::F32 && t == &simd::best() && bf16_gemm_enabled()) continue;
        std::vector<float> got(size_t(rows) * size_t(out));
        linear(x.data(), rows, w, got.data(), true, CpuContext(pool, *t));
        for (int r = 0; r < rows; ++r)
          for (int o = 0; o < out; ++o) {
            const float* xr = x.data() + size_t(r) * size_t(in);
            const float want = grouped ? scalar[size_t(r) * size_t(out) + size_t(o)] : row_kernels(format).dot(*t, xr, w.row(o), in);
            ASSERT_EQ(got[size_t(r) * size_t(out) + size_t(o)], want) << "row " << r << " output " << o;
          }
      }
    }
  }
}

TEST(Linear, EveryTableAndBlasMatchTheNaiveReference) {
  std::mt19937 rng(5);
  for (WeightFormat format : {WeightFormat::F32, WeightFormat::BF16, WeightFormat::F16, WeightFormat::Q8_0, WeightFormat::Q4_0})
    for (int rows : {1, 2, 3, 4, 5, 9, 16, 21})
      for (auto [out, in] : {std::pair{1, 1}, {7, 13}, {33, 64}, {70, 129}, {300, 96}}) {
        SCOPED_TRACE(weight_format_name(format));
        if (!weight_format_fits(format, in)) continue;
        auto wf = random_vec(rng, size_t(out) * size_t(in));
        const WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
        ASSERT_EQ(w.bytes(), size_t(out) * weight_row_bytes(format, in));
        for (size_t k = 0; k < wf.size(); ++k)  // the exact values the kernel sees
          wf[k] = format == WeightFormat::BF16  ? bf16_to_f32(f32_to_bf16(wf[k]))
                  : format == WeightFormat::F16 ? f16_to_f32(f32_to_f16(wf[k]))
                                                : wf[k];
        for (int o = 0; o < out && weight_format_is_blocked(format); ++o)
          (format == WeightFormat::Q8_0 ? simd::generic_table().expand_q8 : simd::generic_table().expand_q4)(
              w.row(o), in, wf.data() + size_t(o) * size_t(in));
        std::vector<float> row(static_cast<size_t>(in));
        for (int o = 0; o < out; ++o) {
          w.row_f32(o, row.data());
          for (int i = 0; i < in; ++i) ASSERT_EQ(row[size_t(i)], wf[size_t(o) * size_t(in) + size_t(i)]);
        }
        const auto x = random_vec(rng, size_t(rows) * size_t(in));
        std::vector<float> want(size_t(rows) * size_t(out)), got(want.size());
        ref::linear(x.data(), rows, in, wf.data(), out, want.data());
        const float tol = 2e-5f * float(in);
        for (const simd::KernelTable* t : simd::available()) {
          linear_with(*t, x.data(), rows, w, got.data());
          for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], tol) << t->name << " rows " << rows;
        }
        {
          // BLAS panels from kGemmRows rows: the exact path. bf16 weights
          // may otherwise take bf16 products (test_gemm_bf16.cpp).
          const bool saved = exact_gemm();
          set_exact_gemm(true);
          linear(x.data(), rows, w, got.data());
          set_exact_gemm(saved);
        }
        for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], tol) << "linear rows " << rows;
        if (weight_format_is_blocked(format)) {  // int8 activations: within their own rounding of the f32 result
          WeightMatrix w8 = w;
          w8.int8_activations = true;
          for (const simd::KernelTable* t : simd::available()) {
            linear_with(*t, x.data(), rows, w8, got.data());
            for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], 0.02 * std::sqrt(double(in))) << t->name;
          }
        }
      }
}

namespace {

// A row of `n` values, not whole blocks, is refused naming the format.
void expect_partial_block_refused(WeightFormat format, const std::vector<float>& x, int n) {
  try {
    (void)WeightMatrix::from_f32(format, 1, n, x.data());
    ADD_FAILURE() << "a row of " << n << " values was stored as " << weight_format_name(format);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(weight_format_name(format)), std::string::npos) << e.what();
  }
}

// Q4_0 value j of a block (before - 8): byte j's low nibble, or byte j - 16's high one.
int q4_nibble(const uint8_t* block, int j) { return j < 16 ? block[2 + j] & 15 : block[2 + j - 16] >> 4; }

}  // namespace

// Q8_0: the quantizer gives llama.cpp's quantize_row_q8_0 bytes (a block's
// d = max |x| / 127 stored as f16, q = round(x / d) with the unrounded d),
// every value within d / 2 of its block's d * q, an all-zero block d = 0.
TEST(Q8_0, QuantizesAsLlamaCppAndWithinHalfAStep) {
  std::mt19937 rng(11);
  std::vector<float> x = random_vec(rng, 96);
  for (int j = 0; j < 32; ++j) x[size_t(32 + j)] = 0.f;             // block 1: all zero
  for (int j = 0; j < 32; ++j) x[size_t(64 + j)] = float(j - 16) * 4;  // block 2: amax 64, d = 64/127
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q8_0, 1, 96, x.data());
  ASSERT_EQ(w.bytes(), 3u * 34u);
  for (int b = 0; b < 3; ++b) {
    const uint8_t* block = w.row(0) + b * 34;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[size_t(b * 32 + j)]));
    const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    uint16_t h;
    std::memcpy(&h, block, 2);
    EXPECT_EQ(h, f32_to_f16(d)) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const float v = x[size_t(b * 32 + j)];
      EXPECT_EQ(int8_t(block[2 + j]), int8_t(std::lround(v * id))) << b << "," << j;
      EXPECT_LE(std::abs(f16_to_f32(h) * float(int8_t(block[2 + j])) - v), 0.5f * d + 1e-3f * amax) << b << "," << j;
    }
  }
  EXPECT_EQ(w.row(0)[34], 0);  // the zero block's scale
  expect_partial_block_refused(WeightFormat::Q8_0, x, 40);
}

// Every table's Q8_0 kernels against a float64 sum over the dequantized
// weights; dot4 gives each row exactly dot's bits (batched decode = solo).
TEST(Q8_0, EveryTableMatchesTheDequantizedDotAndDot4EqualsDot) {
  std::mt19937 rng(12);
  for (int n : {32, 64, 96, 256, 1152, 4128}) {
    const auto wf = random_vec(rng, size_t(n));
    const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q8_0, 1, n, wf.data());
    std::vector<float> deq(static_cast<size_t>(n));
    simd::generic_table().expand_q8(w.row(0), n, deq.data());
    std::vector<std::vector<float>> xs;
    for (int r = 0; r < 4; ++r) xs.push_back(random_vec(rng, size_t(n)));
    const float* xp[4] = {xs[0].data(), xs[1].data(), xs[2].data(), xs[3].data()};
    for (const simd::KernelTable* t : simd::available()) {
      SCOPED_TRACE(std::string(t->name) + " n " + std::to_string(n));
      std::vector<float> e(static_cast<size_t>(n));
      t->expand_q8(w.row(0), n, e.data());
      EXPECT_EQ(e, deq) << "expansion is d * q exactly";
      float four[4];
      t->dot4_q8(xp, w.row(0), n, four);
      for (int r = 0; r < 4; ++r) {
        double want = 0;
        for (int k = 0; k < n; ++k) want += double(xs[size_t(r)][size_t(k)]) * deq[size_t(k)];
        const float one = t->dot_q8(xs[size_t(r)].data(), w.row(0), n);
        EXPECT_NEAR(one, want, 2e-6 * n);
        EXPECT_EQ(four[r], one) << "row " << r;
      }
    }
  }
}

// q8_0 x q8_0 (int8 activations): every table's activation quantizer gives
// the generic table's bytes; the dot equals a float64 sum of the exact
// integer block sums times their scales; dot4 gives each row dot's bits.
TEST(Q8_0, IntegerDotMatchesTheExactBlockSumsAndDot4EqualsDot) {
  std::mt19937 rng(13);
  for (int n : {32, 64, 96, 1152, 4128}) {
    const auto wf = random_vec(rng, size_t(n));
    const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q8_0, 1, n, wf.data());
    std::vector<std::vector<float>> xs(4);
    for (auto& x : xs) x = random_vec(rng, size_t(n));
    xs[1][0] = 0.f;
    for (int j = 0; j < 32; ++j) xs[2][size_t(j)] = 0.f;  // an all-zero activation block
    std::vector<std::vector<float>> scale(4, std::vector<float>(size_t(n / 32)));
    std::vector<std::vector<int8_t>> q(4, std::vector<int8_t>(size_t(n)));
    for (int r = 0; r < 4; ++r) simd::generic_table().quantize_q8_activations(xs[size_t(r)].data(), n, 32, scale[size_t(r)].data(), q[size_t(r)].data());
    for (const simd::KernelTable* t : simd::available()) {
      SCOPED_TRACE(std::string(t->name) + " n " + std::to_string(n));
      std::vector<float> s2(size_t(n / 32));
      std::vector<int8_t> q2(static_cast<size_t>(n));
      t->quantize_q8_activations(xs[0].data(), n, 32, s2.data(), q2.data());
      EXPECT_EQ(s2, scale[0]);
      EXPECT_EQ(q2, q[0]);
      const float* sp[4] = {scale[0].data(), scale[1].data(), scale[2].data(), scale[3].data()};
      const int8_t* qp[4] = {q[0].data(), q[1].data(), q[2].data(), q[3].data()};
      float four[4];
      t->dot4_q8_q8(sp, qp, w.row(0), n, four);
      for (int r = 0; r < 4; ++r) {
        double want = 0;
        for (int b = 0; b < n / 32; ++b) {
          const uint8_t* block = w.row(0) + b * 34;
          uint16_t h;
          std::memcpy(&h, block, 2);
          int64_t isum = 0;
          for (int j = 0; j < 32; ++j) isum += int64_t(q[size_t(r)][size_t(b * 32 + j)]) * int8_t(block[2 + j]);
          want += double(isum) * double(scale[size_t(r)][size_t(b)]) * double(f16_to_f32(h));
        }
        const float one = t->dot_q8_q8(sp[r], qp[r], w.row(0), n);
        EXPECT_NEAR(one, want, 1e-5 * (1 + std::abs(want)) * std::sqrt(double(n)));
        EXPECT_EQ(four[r], one) << "row " << r;
      }
    }
  }
}

// Every table quantizes activations to the generic table's bytes and
// scales: random rows, halfway products (round to even), NaN and infinite
// activations (their block's values are 0), subnormal and zero blocks.
TEST(Q8_0, EveryTableQuantizesActivationsAsTheGenericTable) {
  std::mt19937 rng(11);
  std::vector<float> x = random_vec(rng, 32 * 16);
  for (int j = 0; j < 32; ++j) x[size_t(j)] = float(j % 7) - 3.5f;          // ties after scaling by 127 / 3.5
  x[32 + 5] = std::numeric_limits<float>::quiet_NaN();
  x[64 + 9] = std::numeric_limits<float>::infinity();
  x[96 + 31] = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < 32; ++j) x[size_t(128 + j)] = 1e-39f * float(j - 16);  // subnormal
  for (int j = 0; j < 32; ++j) x[size_t(160 + j)] = 0.f;
  for (int j = 0; j < 32; ++j) x[size_t(192 + j)] = j == 3 ? -127.f : float(j);  // integers: q == x
  for (int j = 0; j < 32; ++j) x[size_t(256 + 64 + j)] = float(j % 7) - 3.5f;    // ties in a 256-value block
  for (int block : {32, 256}) {  // Q8_0 form; Q8_K form (the K-quants')
    SCOPED_TRACE("block " + std::to_string(block));
    std::vector<float> want_scale(x.size() / size_t(block)), scale(want_scale.size());
    std::vector<int8_t> want_q(x.size()), q(x.size());
    simd::generic_table().quantize_q8_activations(x.data(), int(x.size()), block, want_scale.data(), want_q.data());
    if (block == 32) {
      EXPECT_EQ(want_q[size_t(192 + 3)], -127);
      EXPECT_EQ(want_q[size_t(192 + 31)], 31);
      for (int j = 32; j < 128; ++j) EXPECT_EQ(want_q[size_t(j)], 0) << j;
    } else {
      for (int j = 0; j < 256; ++j) EXPECT_EQ(want_q[size_t(j)], 0) << j;  // the NaN's scale
      EXPECT_FALSE(std::isnan(want_scale[1]));
    }
    for (const simd::KernelTable* t : simd::available()) {
      SCOPED_TRACE(t->name);
      t->quantize_q8_activations(x.data(), int(x.size()), block, scale.data(), q.data());
      EXPECT_EQ(q, want_q);
      for (size_t b = 0; b < scale.size(); ++b)
        EXPECT_EQ(std::bit_cast<uint32_t>(scale[b]), std::bit_cast<uint32_t>(want_scale[b])) << "block " << b;
    }
  }
}

// Activations quantize as ONNX Runtime's int8 MatMulNBits path (MLAS's
// QuantizeARow_CompInt8) does: s = amax / 127, q = round half to even of
// x * (127 / amax), the inverse in one division. An exported package of
// block weights then sees the same int8 activations (test_onnx_export). The
// block below holds a value whose q differs under 1 / s, so the form is pinned.
TEST(Q8_0, ActivationsQuantizeAsOnnxRuntimesInt8Path) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.5f, 2.f);
  float amax = 0, pinned = 0;
  for (int tries = 0; tries < 100000 && pinned == 0; ++tries) {
    const float a = u(rng), inv = 127.f / a, two_step = 1.f / (a / 127.f);
    if (inv == two_step) continue;
    for (int k = 1; k < 126 && pinned == 0; ++k) {
      const float x = (float(k) + 0.5f) / inv;
      if (std::nearbyint(x * inv) != std::nearbyint(x * two_step)) amax = a, pinned = x;
    }
  }
  ASSERT_NE(pinned, 0.f) << "no value found whose q depends on the form of the inverse";
  std::vector<float> x = random_vec(rng, 64);
  for (float& v : x) v *= 0.25f;  // below amax (>= 0.5): x[3] is block 0's max
  x[3] = amax, x[17] = pinned;  // block 0: its max and the pinned value
  for (const simd::KernelTable* t : simd::available()) {
    SCOPED_TRACE(t->name);
    std::vector<float> scale(2);
    std::vector<int8_t> q(64);
    t->quantize_q8_activations(x.data(), 64, 32, scale.data(), q.data());
    for (int b = 0; b < 2; ++b) {
      float m = 0;
      for (int j = 0; j < 32; ++j) m = std::max(m, std::abs(x[size_t(32 * b + j)]));
      EXPECT_EQ(scale[size_t(b)], m / 127.f);
      for (int j = 0; j < 32; ++j)
        EXPECT_EQ(q[size_t(32 * b + j)], int8_t(std::nearbyint(x[size_t(32 * b + j)] * (127.f / m)))) << b << " " << j;
    }
  }
}

// Edge values: a NaN activation reaches the output (as in the f32 path), a
// block of subnormal-sized activations quantizes to zeros, and a weight
// block beyond the f16 scale's range is refused rather than stored as inf.
TEST(Q8_0, NaNPropagatesTinyBlocksAreZeroAndHugeWeightsAreRefused) {
  std::vector<float> x(64, 1e-39f), wf(64, 0.5f);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q8_0, 1, 64, wf.data());
  for (const simd::KernelTable* t : simd::available()) {
    SCOPED_TRACE(t->name);
    std::vector<float> scale(2);
    std::vector<int8_t> q(64);
    t->quantize_q8_activations(x.data(), 64, 32, scale.data(), q.data());
    EXPECT_LT(scale[0], std::numeric_limits<float>::min());  // a subnormal scale: the values quantize to 0
    for (int j = 0; j < 32; ++j) EXPECT_EQ(q[size_t(j)], 0);
    EXPECT_TRUE(std::isnan(scale[1]));
    EXPECT_TRUE(std::isnan(t->dot_q8_q8(scale.data(), q.data(), w.row(0), 64)));
  }
  std::vector<float> huge(32, 1.f);
  huge[7] = 1e7f;
  EXPECT_THROW((void)WeightMatrix::from_f32(WeightFormat::Q8_0, 1, 32, huge.data()), InputError);
}

// Q4_0: the quantizer gives llama.cpp's quantize_row_q4_0_ref bytes,
// written out here from its definition: d = (the block's value of largest
// magnitude) / -8 stored as f16, nibble = min(15, trunc(x / d + 8.5)) with
// the unrounded d, value j in byte j's low nibble and j + 16 in its high one.
TEST(Q4_0, QuantizesAsLlamaCppAndWithinHalfAStep) {
  std::mt19937 rng(21);
  std::vector<float> x = random_vec(rng, 128);
  for (int j = 0; j < 32; ++j) x[size_t(32 + j)] = 0.f;              // block 1: all zero
  for (int j = 0; j < 32; ++j) x[size_t(64 + j)] = float(j - 16);     // block 2: max -16 (negative), d = 2
  for (int j = 0; j < 32; ++j) x[size_t(96 + j)] = float(j) * 0.25f;  // block 3: max 7.75 (positive), d < 0
  const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q4_0, 1, 128, x.data());
  ASSERT_EQ(w.bytes(), 4u * 18u);
  for (int b = 0; b < 4; ++b) {
    const uint8_t* block = w.row(0) + b * 18;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (amax < std::abs(x[size_t(b * 32 + j)])) amax = std::abs(x[size_t(b * 32 + j)]), max = x[size_t(b * 32 + j)];
    const float d = max / -8, id = d != 0.f ? 1.f / d : 0.f;
    uint16_t h;
    std::memcpy(&h, block, 2);
    EXPECT_EQ(h, f32_to_f16(d)) << "block " << b;
    for (int j = 0; j < 32; ++j) {
      const float v = x[size_t(b * 32 + j)];
      const int want = std::min(15, int(int8_t(v * id + 8.5f)));
      const int got = q4_nibble(block, j);
      EXPECT_EQ(got, want) << b << "," << j;
      // The range is -8 .. 7 steps: a value clipped at 7 may be a whole step off.
      EXPECT_LE(std::abs(f16_to_f32(h) * float(got - 8) - v), (got == 15 ? 1.f : 0.5f) * std::abs(d) + 1e-3f * amax) << b << "," << j;
    }
  }
  EXPECT_EQ(w.row(0)[18], 0);  // the zero block's scale
  expect_partial_block_refused(WeightFormat::Q4_0, x, 48);
  std::vector<float> huge(32, 1.f);
  huge[3] = -1e6f;
  EXPECT_THROW((void)WeightMatrix::from_f32(WeightFormat::Q4_0, 1, 32, huge.data()), InputError);
}

// The AVX-512 Q4_0 x q8_0 kernel works on two blocks per register, each
// half being the AVX2 kernel's even or odd accumulator: the two give the same
// bits, for even and odd block counts, any nibbles and activations.
TEST(Q4_0, Avx512ActivationKernelGivesTheAvx2KernelsBits) {
  const auto tables = simd::available();
  if (std::find(tables.begin(), tables.end(), &simd::avx512_table()) == tables.end()) GTEST_SKIP() << "no AVX-512 here";
  const simd::KernelTable &wide = simd::avx512_table(), &narrow = simd::avx2_table();
  std::mt19937 rng(31);
  for (int n : {32, 64, 96, 160, 1152, 4128}) {
    const int blocks = n / 32;
    std::vector<uint8_t> w(size_t(blocks) * 18);
    for (int b = 0; b < blocks; ++b) {
      const uint16_t h = uint16_t(0x2000 + rng() % 0x3000);  // f16 scales from ~1e-4 to ~100
      std::memcpy(&w[size_t(b) * 18], &h, 2);
      for (int j = 0; j < 16; ++j) w[size_t(b) * 18 + 2 + size_t(j)] = uint8_t(rng());
    }
    std::vector<std::vector<float>> scale(4, std::vector<float>(size_t(blocks)));
    std::vector<std::vector<int8_t>> q(4, std::vector<int8_t>(size_t(n)));
    for (auto& row : scale)
      for (float& v : row) v = std::ldexp(float(rng() % 1000 + 1), -int(rng() % 20));
    for (auto& row : q)
      for (int8_t& v : row) v = int8_t(int(rng() % 255) - 127);
    const float* sp[4] = {scale[0].data(), scale[1].data(), scale[2].data(), scale[3].data()};
    const int8_t* qp[4] = {q[0].data(), q[1].data(), q[2].data(), q[3].data()};
    float a[4], b4[4];
    wide.dot4_q4_q8(sp, qp, w.data(), n, a);
    narrow.dot4_q4_q8(sp, qp, w.data(), n, b4);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(a[r], b4[r]) << "n " << n << " row " << r;
      EXPECT_EQ(wide.dot_q4_q8(sp[r], qp[r], w.data(), n), narrow.dot_q4_q8(sp[r], qp[r], w.data(), n)) << "n " << n;
    }
  }
}

// Every table's Q4_0 kernels: expansion d * (nibble - 8) exactly, the f32
// dot against a float64 sum over those values, the dot against q8_0
// activations against the exact integer block sums; dot4 = dot bit for bit.
TEST(Q4_0, EveryTableMatchesTheDequantizedAndIntegerDotsAndDot4EqualsDot) {
  std::mt19937 rng(22);
  for (int n : {32, 64, 96, 256, 1152, 4128}) {
    const auto wf = random_vec(rng, size_t(n));
    const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::Q4_0, 1, n, wf.data());
    std::vector<float> deq(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      const uint8_t* block = w.row(0) + (k / 32) * 18;
      const int nib = q4_nibble(block, k % 32);
      uint16_t h;
      std::memcpy(&h, block, 2);
      deq[size_t(k)] = f16_to_f32(h) * float(nib - 8);
    }
    std::vector<std::vector<float>> xs;
    for (int r = 0; r < 4; ++r) xs.push_back(random_vec(rng, size_t(n)));
    const float* xp[4] = {xs[0].data(), xs[1].data(), xs[2].data(), xs[3].data()};
    std::vector<std::vector<float>> scale(4, std::vector<float>(size_t(n / 32)));
    std::vector<std::vector<int8_t>> q(4, std::vector<int8_t>(size_t(n)));
    for (int r = 0; r < 4; ++r) simd::generic_table().quantize_q8_activations(xs[size_t(r)].data(), n, 32, scale[size_t(r)].data(), q[size_t(r)].data());
    const float* sp[4] = {scale[0].data(), scale[1].data(), scale[2].data(), scale[3].data()};
    const int8_t* qp[4] = {q[0].data(), q[1].data(), q[2].data(), q[3].data()};
    for (const simd::KernelTable* t : simd::available()) {
      SCOPED_TRACE(std::string(t->name) + " n " + std::to_string(n));
      std::vector<float> e(static_cast<size_t>(n));
      t->expand_q4(w.row(0), n, e.data());
      EXPECT_EQ(e, deq);
      float four[4], four8[4];
      t->dot4_q4(xp, w.row(0), n, four);
      t->dot4_q4_q8(sp, qp, w.row(0), n, four8);
      for (int r = 0; r < 4; ++r) {
        double want = 0, want8 = 0;
        for (int k = 0; k < n; ++k) want += double(xs[size_t(r)][size_t(k)]) * deq[size_t(k)];
        for (int b = 0; b < n / 32; ++b) {
          int64_t isum = 0;
          uint16_t h;
          std::memcpy(&h, w.row(0) + b * 18, 2);
          for (int j = 0; j < 32; ++j) {
            const float wv = deq[size_t(b * 32 + j)], d = f16_to_f32(h);
            isum += int64_t(q[size_t(r)][size_t(b * 32 + j)]) * (d != 0.f ? std::lround(wv / d) : 0);
          }
          want8 += double(isum) * double(scale[size_t(r)][size_t(b)]) * double(f16_to_f32(h));
        }
        const float one = t->dot_q4(xs[size_t(r)].data(), w.row(0), n);
        EXPECT_NEAR(one, want, 2e-6 * n);
        EXPECT_EQ(four[r], one) << "row " << r;
        const float one8 = t->dot_q4_q8(sp[r], qp[r], w.row(0), n);
        EXPECT_NEAR(one8, want8, 1e-5 * (1 + std::abs(want8)) * std::sqrt(double(n)));
        EXPECT_EQ(four8[r], one8) << "row " << r;
      }
    }
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool::set_threads(threads);
    std::vector<int> hits(1000, 0);
    ThreadPool::global()->parallel_for(1000, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) ++hits[size_t(i)];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
  ThreadPool::set_threads(0);
}

TEST(ThreadPool, AThrowingRangeReachesTheCallerAndThePoolGoesOn) {
  ThreadPool pool(4);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    EXPECT_THROW(pool.parallel_for(64, [&](int64_t a, int64_t) {
      ++ran;
      if (a == (round % 2 ? 0 : 32)) throw std::runtime_error("range failed");  // on the caller or on a worker
    }), std::runtime_error);
    std::vector<int> seen(100, 0);
    pool.parallel_for(100, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) ++seen[size_t(k)];
    });
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 100);
  }
}

TEST(ThreadPool, BackgroundJobsCoverEveryIndexOnceAndRethrow) {
  for (int threads : {1, 2, 3}) {
    ThreadPool::set_threads(threads);
    ThreadPool::Background background;
    std::vector<int> hits(1000, 0);
    ThreadPool::global()->parallel_for(1000, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) ++hits[size_t(i)];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
    EXPECT_THROW(ThreadPool::global()->parallel_for(64, [&](int64_t a, int64_t) {
      if (a == 0) throw std::runtime_error("range failed");
    }), std::runtime_error);
  }
  ThreadPool::set_threads(0);
}

// An encode whose client left stops at its next job, not at its end.
TEST(ThreadPool, ACancelledBackgroundStopsAtItsNextJob) {
  ThreadPool::set_threads(2);
  std::atomic<bool> gone{false};
  int jobs = 0;
  try {
    ThreadPool::Background background([&] { return gone.load(); });
    for (; jobs < 100; ++jobs) {
      if (jobs == 3) gone = true;
      ThreadPool::global()->parallel_for(64, [&](int64_t, int64_t) {});
    }
    ADD_FAILURE() << "not cancelled";
  } catch (const ThreadPool::Cancelled&) {
  }
  EXPECT_EQ(jobs, 3);
  // The thread's later jobs, outside the scope, run as before.
  std::atomic<int> sum{0};
  ThreadPool::global()->parallel_for(64, [&](int64_t a, int64_t b) { sum += int(b - a); });
  EXPECT_EQ(sum, 64);
  ThreadPool::set_threads(0);
}

// A server's decode steps hold a ForegroundSpan: no background range (a
// media encode's) starts inside one, except the one granted each time the
// spans close, and the background job finishes once they do.
TEST(ThreadPool, NoBackgroundRangeStartsInsideASpan) {
  ThreadPool::set_threads(2);
  std::atomic<int> ran{0};
  std::optional<ThreadPool::ForegroundSpan> span(std::in_place);
  std::thread encode([&] {
    ThreadPool::Background background;
    ThreadPool::global()->parallel_for(64, [&](int64_t a, int64_t b) { ran += int(b - a); });
  });
  for (int k = 0; k < 20; ++k) {  // foreground jobs come and go meanwhile
    std::atomic<int> sum{0};
    ThreadPool::global()->parallel_for(100, [&](int64_t a, int64_t b) { sum += int(b - a); });
    EXPECT_EQ(sum, 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(ran, 0);
  span.reset();
  encode.join();
  EXPECT_EQ(ran, 64);
  ThreadPool::set_threads(0);
}

// A foreground job waits at most for the background ranges already running,
// not for the background job: here every background range blocks until the
// foreground job is done, so a pool that ran one job after the other would
// only get there through the ranges' timeout.
TEST(ThreadPool, AForegroundJobDoesNotWaitForABackgroundJob) {
  ThreadPool::set_threads(2);
  std::mutex mu;
  std::condition_variable cv;
  bool foreground_done = false, timed_out = false;
  std::atomic<int> started{0};
  std::thread encode([&] {
    ThreadPool::Background background;
    ThreadPool::global()->parallel_for(64, [&](int64_t, int64_t) {
      ++started;
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(5), [&] { return foreground_done; })) timed_out = true;
    });
  });
  while (started == 0) std::this_thread::yield();
  std::atomic<int> sum{0};
  ThreadPool::global()->parallel_for(1000, [&](int64_t a, int64_t b) { sum += int(b - a); });
  EXPECT_EQ(sum, 1000);
  {
    std::lock_guard<std::mutex> lock(mu);
    foreground_done = true;
  }
  cv.notify_all();
  encode.join();
  EXPECT_FALSE(timed_out);
  ThreadPool::set_threads(0);
}

TEST(ThreadPool, ReplacingThePoolWhileJobsRunIsSafe) {
  std::atomic<bool> stop{false};
  std::atomic<int64_t> sum{0};
  std::thread worker([&] {
    while (!stop) ThreadPool::global()->parallel_for(64, [&](int64_t a, int64_t b) { sum += b - a; });
  });
  for (int k = 0; k < 50; ++k) ThreadPool::set_threads(1 + k % 3);
  stop = true;
  worker.join();
  ThreadPool::set_threads(0);
  EXPECT_EQ(sum % 64, 0);
}
