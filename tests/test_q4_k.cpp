// Q4_K weights as they run (weight_matrix.h, simd/row_groups.h,
// kernels/q4_k_rows.h): the group layout round-trips, every row-group
// kernel this CPU runs gives the contract's bits (row_groups.h) and the
// dot product of llama.cpp's dequantized values within f32 rounding, a
// row gets the same bits grouped or not, alone or batched, in decode or
// in prefill. Weights are random bytes (every packed-scale bit pattern),
// not only what a quantizer writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "io/ggml_block_formats.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/row_groups.h"

using namespace splitdec;

namespace {

// Random super-blocks: random qs and packed scale bytes, d and dmin finite
// f16 near `scale`.
WeightMatrix random_q4_k(std::mt19937& rng, int out, int in, float scale = 0.01f) {
  std::vector<uint8_t> bytes(size_t(out) * weight_row_bytes(WeightFormat::Q4_K, in));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> factor(0.f, scale);
  for (size_t b = 0; b < bytes.size() / 144; ++b) {
    uint8_t* block = &bytes[b * 144];
    for (int k = 0; k < 144; ++k) block[k] = uint8_t(byte(rng));
    const uint16_t d = f32_to_f16(factor(rng)), dmin = f32_to_f16(factor(rng));
    std::memcpy(block, &d, 2);
    std::memcpy(block + 2, &dmin, 2);
  }
  WeightMatrix w = WeightMatrix::from_bytes(WeightFormat::Q4_K, out, in, bytes.data());
  w.int8_activations = true;
  return w;
}

std::vector<float> random_vec(std::mt19937& rng, size_t n, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Activation rows in Q8_0 form with their block sums, as linear() makes them.
struct QRows {
  std::vector<std::vector<float>> scale;
  std::vector<std::vector<int8_t>> q;
  std::vector<std::vector<int32_t>> sum;
  std::vector<simd::Q8Row> rows;
};
QRows quantized(const std::vector<std::vector<float>>& xs, int n) {
  QRows r;
  for (const auto& x : xs) {
    r.scale.emplace_back(size_t(n / 32));
    r.q.emplace_back(size_t(n));
    simd::generic_table().quantize_q8_activations(x.data(), n, r.scale.back().data(), r.q.back().data());
    r.sum.emplace_back(size_t(n / 32));
    for (int b = 0; b < n / 32; ++b)
      for (int j = 0; j < 32; ++j) r.sum.back()[size_t(b)] += r.q.back()[size_t(b * 32 + j)];
  }
  for (size_t k = 0; k < xs.size(); ++k) r.rows.push_back({r.scale[k].data(), r.q[k].data(), nullptr, nullptr, r.sum[k].data()});
  return r;
}

// The contract of row_groups.h written from llama.cpp's block layout: per
// 32-value sub-block j the exact integer sums, then
// fma(x_scale, fma(d sc_j, S, -(dmin m_j X)), acc) in order.
float contract(const uint8_t* row, const simd::Q8Row& x, int n) {
  float acc = 0;
  for (int sb = 0; sb < n / 256; ++sb) {
    const uint8_t* block = row + sb * 144;
    uint16_t d, dmin;
    std::memcpy(&d, block, 2);
    std::memcpy(&dmin, block + 2, 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k_quant_scale_min(j, block + 4, &sc, &m);
      const int b = sb * 8 + j;
      int64_t s = 0, xs = 0;
      for (int t = 0; t < 32; ++t) {
        const uint8_t byte = block[16 + 32 * (j / 2) + t];
        s += int64_t(j % 2 ? byte >> 4 : byte & 15) * x.q[b * 32 + t];
        xs += x.q[b * 32 + t];
      }
      const float minimum = f16_to_f32(dmin) * float(m) * float(xs);
      acc = std::fma(x.scale[b], std::fma(f16_to_f32(d) * float(sc), float(s), -minimum), acc);
    }
  }
  return acc;
}

}  // namespace

TEST(Q4K, GroupLayoutRoundTripsEveryRow) {
  std::mt19937 rng(1);
  for (int out : {1, 15, 16, 17, 33})
    for (int in : {256, 512, 2304}) {
      SCOPED_TRACE("out " + std::to_string(out) + " in " + std::to_string(in));
      const WeightMatrix rows = random_q4_k(rng, out, in);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      EXPECT_EQ(grouped.grouped_rows, out / 16 * 16);
      EXPECT_EQ(grouped.bytes(), rows.bytes());
      std::vector<uint8_t> got(rows.row_bytes());
      std::vector<float> f_rows(static_cast<size_t>(in)), f_grouped(static_cast<size_t>(in)), ggml(static_cast<size_t>(in));
      for (int o = 0; o < out; ++o) {
        grouped.copy_row(o, got.data());
        ASSERT_EQ(0, std::memcmp(got.data(), rows.row(o), got.size())) << "row " << o;
        rows.row_f32(o, f_rows.data());
        grouped.row_f32(o, f_grouped.data());
        dequantize_ggml_blocks(GgmlBlocks::Q4_K, rows.row(o), ggml.data(), in);
        ASSERT_EQ(f_rows, f_grouped) << "row " << o;
        ASSERT_EQ(f_rows, ggml) << "row " << o;
      }
      if (out >= 16) {  // row 5's super-block b: dmin at 2304 b + 32 + 10, packed byte 7 at + 64 + 112 + 5, qs byte 4 c + t at + 256 + 64 c + 20 + t
        const int i = 5, b = in / 256 - 1, c = 29, t = 3;
        const uint8_t* g = grouped.group(0) + 2304 * b;
        const uint8_t* r = rows.row(i) + 144 * b;
        EXPECT_EQ(0, std::memcmp(g + 32 + 2 * i, r + 2, 2));
        EXPECT_EQ(g[64 + 16 * 7 + i], r[4 + 7]);
        EXPECT_EQ(g[256 + 64 * c + 4 * i + t], r[16 + 4 * c + t]);
      }
    }
}

TEST(Q4K, EveryKernelGivesTheContractsBitsAndTheDequantizedDot) {
  std::mt19937 rng(3);
  for (int n : {256, 512, 1280, 2304, 4096}) {
    const WeightMatrix rows = random_q4_k(rng, 16, n);
    WeightMatrix grouped = rows;
    grouped.group_rows();
    std::vector<std::vector<float>> xs;
    for (int r = 0; r < 4; ++r) xs.push_back(random_vec(rng, size_t(n), r == 3 ? 1e-3f : 2.f));
    const QRows x = quantized(xs, n);
    for (const simd::RowGroupKernels* k : simd::row_group_kernels_available())
      for (int count = 1; count <= 4; ++count) {
        SCOPED_TRACE(std::string(k->name) + " n " + std::to_string(n) + " rows " + std::to_string(count));
        std::vector<float> out(size_t(count) * 16, -1.f), wrow(static_cast<size_t>(n));
        k->q4_k(x.rows.data(), count, grouped.group(0), n, out.data());
        for (int r = 0; r < count; ++r)
          for (int i = 0; i < 16; ++i) {
            const float want = contract(rows.row(i), x.rows[size_t(r)], n);
            ASSERT_EQ(out[size_t(r * 16 + i)], want) << "x row " << r << " weight row " << i;
            double exact = 0, magnitude = 0;
            dequantize_ggml_blocks(GgmlBlocks::Q4_K, rows.row(i), wrow.data(), n);
            for (int j = 0; j < n; ++j) {
              const double term = double(wrow[size_t(j)]) * x.scale[size_t(r)][size_t(j / 32)] * x.q[size_t(r)][size_t(j)];
              exact += term, magnitude += std::abs(term);
            }
            ASSERT_NEAR(want, exact, 1e-6 * magnitude + 1e-30) << "x row " << r << " weight row " << i;
          }
      }
  }
}

// Where maddubs' int16 lanes are fullest (every nibble 15, activations all
// +-127) and every scale and min at 63: exact still.
TEST(Q4K, ExtremeWeightsAndActivationsStayExact) {
  const int n = 512;
  std::vector<uint8_t> bytes(16 * 2 * 144);
  const uint16_t d = f32_to_f16(1.f), dmin = f32_to_f16(0.5f);
  for (size_t b = 0; b < bytes.size() / 144; ++b) {
    std::memcpy(&bytes[b * 144], &d, 2);
    std::memcpy(&bytes[b * 144 + 2], &dmin, 2);
    std::memset(&bytes[b * 144 + 4], 0xff, 140);  // sc = m = 63, nibbles 15
  }
  WeightMatrix rows = WeightMatrix::from_bytes(WeightFormat::Q4_K, 16, n, bytes.data());
  rows.int8_activations = true;
  WeightMatrix grouped = rows;
  grouped.group_rows();
  for (float sign : {1.f, -1.f}) {
    const QRows x = quantized({std::vector<float>(size_t(n), sign)}, n);
    ASSERT_EQ(x.q[0][0], int8_t(127 * sign));
    for (const simd::RowGroupKernels* k : simd::row_group_kernels_available()) {
      float out[16];
      k->q4_k(x.rows.data(), 1, grouped.group(0), n, out);
      for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], contract(rows.row(i), x.rows[0], n)) << k->name << " sign " << sign;
      // 16 sub-blocks of 32 x (63 x 15 x 127 - 31.5 x 127) x 1/127 each
      EXPECT_FLOAT_EQ(out[0], sign * 16 * 32 * (63.f * 15.f - 31.5f));
    }
  }
}

// linear on Q4_K: grouped rows and the rows one at a time give the same
// bits (the same f32 steps), each sequence alone or batched, on every
// table; linear_batch the same.
TEST(Q4K, LinearGivesEachRowTheSameBitsGroupedOrNotAloneOrBatched) {
  std::mt19937 rng(4);
  for (auto [out, in] : {std::pair{16, 256}, {37, 512}, {300, 1280}, {1, 256}}) {
    const WeightMatrix rows = random_q4_k(rng, out, in);
    WeightMatrix grouped = rows;
    grouped.group_rows();
    for (int count : {1, 2, 3, 4, 5, 8, 9, 15}) {
      const auto x = random_vec(rng, size_t(count) * size_t(in));
      for (const simd::KernelTable* t : simd::available()) {
        SCOPED_TRACE(std::string(t->name) + " out " + std::to_string(out) + " in " + std::to_string(in) + " rows " +
                     std::to_string(count));
        std::vector<float> batch(size_t(count) * size_t(out)), solo(static_cast<size_t>(out)), ungrouped(batch.size());
        linear_with(*t, x.data(), count, grouped, batch.data());
        linear_with(*t, x.data(), count, rows, ungrouped.data());
        ASSERT_EQ(batch, ungrouped);
        for (int r = 0; r < count; ++r) {
          linear_with(*t, x.data() + size_t(r) * size_t(in), 1, grouped, solo.data());
          for (int o = 0; o < out; ++o) ASSERT_EQ(batch[size_t(r) * size_t(out) + size_t(o)], solo[size_t(o)]) << "row " << r << " output " << o;
        }
      }
      std::vector<float> batched(size_t(count) * size_t(out)), want(batched.size());
      const LinearJob job{x.data(), count, &grouped, batched.data()};
      linear_batch(&job, 1);
      linear_with(simd::best(), x.data(), count, grouped, want.data());
      EXPECT_EQ(batched, want);
    }
  }
}

// Prefill on grouped Q4_K rows: each prompt row gets exactly its decode
// bits; the f32 GEMM on the same quantized activations and the rows
// expanded (the path for ungrouped rows) agrees within f32 rounding; f32
// activations (q4_k_dot) give the float64 dot within f32 rounding.
TEST(Q4K, PrefillAndFloatActivationsAgreeWithDecode) {
  std::mt19937 rng(5);
  for (auto [out, in, count] : {std::tuple{300, 256, 21}, {32, 512, 23}}) {
    const WeightMatrix rows = random_q4_k(rng, out, in);
    WeightMatrix grouped = rows;
    grouped.group_rows();
    WeightMatrix f32_activations = rows;
    f32_activations.int8_activations = false;
    const auto x = random_vec(rng, size_t(count) * size_t(in));
    std::vector<float> prompt(size_t(count) * size_t(out)), gemm(prompt.size()), alone(static_cast<size_t>(out)),
        float_x(prompt.size()), w(static_cast<size_t>(in));
    linear(x.data(), count, grouped, prompt.data());
    {
      const ExactGemmOnThisThread exact;
      linear(x.data(), count, rows, gemm.data());
    }
    linear_with(simd::best(), x.data(), count, f32_activations, float_x.data());
    const bool grouped_prefill = std::string(simd::best().name) != "generic";
    for (int o = 0; o < out; ++o) {
      rows.row_f32(o, w.data());
      for (int r = 0; r < count; ++r) {
        double exact = 0, magnitude = 0;
        for (int j = 0; j < in; ++j) {
          const double term = double(w[size_t(j)]) * x[size_t(r) * size_t(in) + size_t(j)];
          exact += term, magnitude += std::abs(term);
        }
        const size_t at = size_t(r) * size_t(out) + size_t(o);
        SCOPED_TRACE("row " + std::to_string(r) + " output " + std::to_string(o));
        if (grouped_prefill) {
          linear(x.data() + size_t(r) * size_t(in), 1, grouped, alone.data());
          ASSERT_EQ(prompt[at], alone[size_t(o)]);
        }
        ASSERT_NEAR(prompt[at], gemm[at], 1e-5 * magnitude);
        ASSERT_NEAR(float_x[at], exact, 1e-5 * magnitude);
      }
    }
  }
}
