// The K-quants as they run (Q4_K, Q5_K and Q6_K: weight_matrix.h,
// simd/row_groups.h, kernels/k_quant_rows.h): the group layout
// round-trips, every row-group kernel this CPU runs gives the contract's
// bits (row_groups.h) and the dot product of llama.cpp's dequantized values
// within f32 rounding, a row gets the same bits grouped or not, alone or
// batched, in decode or in prefill. Weights are random bytes (every scale
// bit pattern), not only what a quantizer writes.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "kernels/row_kernels.h"
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/row_groups.h"
#include "random_values.h"

using namespace splitdec;
using test::random_vec;

namespace {

// Activation rows in Q8_K form (a scale per 256 values) with their block
// sums in pairs and half-block sums, as linear() makes them.
struct QRows {
  std::vector<std::vector<float>> scale;
  std::vector<std::vector<int8_t>> q;
  std::vector<std::vector<int32_t>> sum_pairs, half_sums;
  std::vector<simd::Q8Row> rows;
};
int32_t int16_pair(int32_t first, int32_t second) { return int32_t(uint32_t(uint16_t(first)) | uint32_t(uint16_t(second)) << 16); }
QRows quantized(const std::vector<std::vector<float>>& xs, int n) {
  QRows r;
  for (const auto& x : xs) {
    r.scale.emplace_back(size_t(n / 256));
    r.q.emplace_back(size_t(n));
    simd::generic_table().quantize_q8_activations(x.data(), n, 256, r.scale.back().data(), r.q.back().data());
    r.sum_pairs.emplace_back(size_t(n / 64));
    r.half_sums.emplace_back(size_t(n / 32));
    std::vector<int32_t> block_sums(size_t(n / 32));
    for (int b = 0; b < n / 32; ++b) {
      int32_t half[2] = {0, 0};
      for (int j = 0; j < 32; ++j) half[j / 16] += r.q.back()[size_t(b * 32 + j)];
      r.half_sums.back()[size_t(b)] = int16_pair(half[0], half[1]);
      block_sums[size_t(b)] = half[0] + half[1];
    }
    for (int p = 0; p < n / 64; ++p) r.sum_pairs.back()[size_t(p)] = int16_pair(block_sums[size_t(2 * p)], block_sums[size_t(2 * p + 1)]);
  }
  for (size_t k = 0; k < xs.size(); ++k)
    r.rows.push_back({r.scale[k].data(), r.q[k].data(), nullptr, r.sum_pairs[k].data(), r.half_sums[k].data()});
  return r;
}

// The contracts of row_groups.h written from llama.cpp's block layouts,
// the integers in int64 (so a sum past int32 would show).
// Q4_K and Q5_K (its fifth bits from qh): per super-block the exact
// S = sum of sc_j x weight value x activation and M = sum of m_j x
// activation, then fma(x_scale, fma(d, S, -(dmin M)), acc) in order.
template <bool kFive>
float k_quant_min_contract(const uint8_t* row, const simd::Q8Row& x, int n) {
  float acc = 0;
  for (int sb = 0; sb < n / 256; ++sb) {
    const uint8_t* block = row + sb * (kFive ? 176 : 144);
    uint16_t d, dmin;
    std::memcpy(&d, block, 2);
    std::memcpy(&dmin, block + 2, 2);
    int64_t s = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k_quant_scale_min(j, block + 4, &sc, &m);
      for (int t = 0; t < 32; ++t) {
        const uint8_t byte = block[(kFive ? 48 : 16) + 32 * (j / 2) + t];
        const int fifth = kFive && (block[16 + t] >> j & 1) ? 16 : 0;
        const int8_t xq = x.q[sb * 256 + 32 * j + t];
        s += int64_t(sc) * ((j % 2 ? byte >> 4 : byte & 15) + fifth) * xq;
        mins += int64_t(m) * xq;
      }
    }
    EXPECT_LT(std::abs(s), int64_t(1) << 31);
    acc = std::fma(x.scale[sb], std::fma(f16_to_f32(d), float(s), -(f16_to_f32(dmin) * float(mins))), acc);
  }
  return acc;
}

// Q6_K: value v (0-255) of a super-block as ggml's dequantize_row_q6_K
// indexes it, then the exact integer T = sum of sc_(v / 16) (q_v - 32) x_v
// and fma(d x_scale, T, acc) per super-block.
float q6_k_contract(const uint8_t* row, const simd::Q8Row& x, int n) {
  float acc = 0;
  for (int sb = 0; sb < n / 256; ++sb) {
    const uint8_t* block = row + sb * 210;
    uint16_t d;
    std::memcpy(&d, block + 208, 2);
    int64_t t = 0;
    for (int v = 0; v < 256; ++v) {
      const int h = v / 128, k = (v % 128) / 32, l = v % 32;
      const uint8_t ql = block[64 * h + 32 * (k % 2) + l], qh = block[128 + 32 * h + l];
      const int q = (k < 2 ? ql & 15 : ql >> 4) | ((qh >> (2 * k)) & 3) << 4;
      const int sc = int8_t(block[192 + 8 * h + 2 * k + l / 16]);
      t += int64_t(sc) * (q - 32) * x.q[sb * 256 + v];
    }
    acc = std::fma(f16_to_f32(d) * x.scale[sb], float(t), acc);
  }
  return acc;
}

// One K-quant: its formats, block bytes, where its f16 factors lie, its
// row-group kernel and its contract.
struct KQuant {
  const char* name;
  WeightFormat format;
  GgmlBlocks blocks;
  int block_bytes;
  std::vector<int> factors;
  simd::GroupDot simd::RowGroupKernels::*kernel;
  float (*contract)(const uint8_t* row, const simd::Q8Row& x, int n);
};
const KQuant kQ4K{"Q4_K", WeightFormat::Q4_K, GgmlBlocks::Q4_K, 144, {0, 2}, &simd::RowGroupKernels::q4_k, k_quant_min_contract<false>};
const KQuant kQ5K{"Q5_K", WeightFormat::Q5_K, GgmlBlocks::Q5_K, 176, {0, 2}, &simd::RowGroupKernels::q5_k, k_quant_min_contract<true>};
const KQuant kQ6K{"Q6_K", WeightFormat::Q6_K, GgmlBlocks::Q6_K, 210, {208}, &simd::RowGroupKernels::q6_k, q6_k_contract};
const KQuant* const kKQuants[] = {&kQ4K, &kQ5K, &kQ6K};

// Random super-blocks: random bytes, the f16 factors finite near `scale`.
WeightMatrix random_blocks(const KQuant& f, std::mt19937& rng, int out, int in, float scale = 0.01f) {
  std::vector<uint8_t> bytes(size_t(out) * weight_row_bytes(f.format, in));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> factor(0.f, scale);
  for (size_t b = 0; b < bytes.size() / size_t(f.block_bytes); ++b) {
    uint8_t* block = &bytes[b * size_t(f.block_bytes)];
    for (int k = 0; k < f.block_bytes; ++k) block[k] = uint8_t(byte(rng));
    for (int at : f.factors) {
      const uint16_t h = f32_to_f16(factor(rng));
      std::memcpy(block + at, &h, 2);
    }
  }
  WeightMatrix w = WeightMatrix::from_bytes(f.format, out, in, bytes.data());
  w.int8_activations = true;
  return w;
}

}  // namespace

TEST(KQuants, GroupLayoutRoundTripsEveryRow) {
  std::mt19937 rng(1);
  for (const KQuant* f : kKQuants)
    for (int out : {1, 15, 16, 17, 33})
      for (int in : {256, 512, 2304}) {
        SCOPED_TRACE(std::string(f->name) + " out " + std::to_string(out) + " in " + std::to_string(in));
        const WeightMatrix rows = random_blocks(*f, rng, out, in);
        WeightMatrix grouped = rows;
        grouped.group_rows();
        EXPECT_EQ(grouped.grouped_rows, out / 16 * 16);
        EXPECT_EQ(grouped.bytes(), rows.bytes());
        std::vector<uint8_t> got(rows.row_bytes());
        std::vector<float> f_grouped(static_cast<size_t>(in)), ggml(static_cast<size_t>(in));
        for (int o = 0; o < out; ++o) {
          grouped.copy_row(o, got.data());
          ASSERT_EQ(0, std::memcmp(got.data(), rows.row(o), got.size())) << "row " << o;
          grouped.row_f32(o, f_grouped.data());  // the embedding lookup's path
          dequantize_ggml_blocks(f->blocks, rows.row(o), ggml.data(), in);
          ASSERT_EQ(f_grouped, ggml) << "row " << o;
        }
        if (out < 16) continue;
        // Row 5's last super-block, a few bytes where row_groups.h puts them.
        const int i = 5, b = in / 256 - 1;
        const uint8_t* g = grouped.group(0) + 16 * f->block_bytes * b;
        const uint8_t* r = rows.row(i) + f->block_bytes * b;
        if (f != &kQ6K) {  // dmin at 32 + 2i, packed byte 7 at 64 + 16 x 7 + i, qs byte 4c + t at 256 + 64c + 4i + t
          const int qs = f == &kQ5K ? 48 : 16;
          EXPECT_EQ(0, std::memcmp(g + 32 + 2 * i, r + 2, 2));
          EXPECT_EQ(g[64 + 16 * 7 + i], r[4 + 7]);
          EXPECT_EQ(g[256 + 64 * 29 + 4 * i + 3], r[qs + 4 * 29 + 3]);
          if (f == &kQ5K) {  // qh byte 4c + t at 2304 + 64c + 4i + t
            EXPECT_EQ(g[2304 + 64 * 6 + 4 * i + 1], r[16 + 4 * 6 + 1]);
          }
        } else {  // d at 2i, block 6's second scale at 32 + 32 x 6 + 2i + 1, ql / qh byte 4c + t at 288 / 2336 + 64c + 4i + t
          EXPECT_EQ(0, std::memcmp(g + 2 * i, r + 208, 2));
          EXPECT_EQ(g[32 + 32 * 6 + 2 * i + 1], r[192 + 13]);
          EXPECT_EQ(g[288 + 64 * 29 + 4 * i + 3], r[4 * 29 + 3]);
          EXPECT_EQ(g[2336 + 64 * 13 + 4 * i + 2], r[128 + 4 * 13 + 2]);
        }
      }
}

TEST(KQuants, EveryKernelGivesTheContractsBitsAndTheDequantizedDot) {
  std::mt19937 rng(3);
  for (const KQuant* f : kKQuants)
    for (int n : {256, 512, 1280, 2304, 4096}) {
      const WeightMatrix rows = random_blocks(*f, rng, 16, n);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < simd::kMaxGroupDotRows; ++r) xs.push_back(random_vec(rng, size_t(n), r == 3 ? 1e-3f : 2.f));
      const QRows x = quantized(xs, n);
      for (const simd::RowGroupKernels* k : simd::row_group_kernels_available())
        for (int count = 1; count <= simd::kMaxGroupDotRows; ++count) {
          SCOPED_TRACE(std::string(f->name) + " " + k->name + " n " + std::to_string(n) + " rows " + std::to_string(count));
          std::vector<float> out(size_t(count) * 16, -1.f), wrow(static_cast<size_t>(n));
          (k->*f->kernel)(x.rows.data(), count, grouped.group(0), n, out.data());
          for (int r = 0; r < count; ++r)
            for (int i = 0; i < 16; ++i) {
              const float want = f->contract(rows.row(i), x.rows[size_t(r)], n);
              ASSERT_EQ(out[size_t(r * 16 + i)], want) << "x row " << r << " weight row " << i;
              double exact = 0, magnitude = 0;
              dequantize_ggml_blocks(f->blocks, rows.row(i), wrow.data(), n);
              for (int j = 0; j < n; ++j) {
                const double term = double(wrow[size_t(j)]) * x.scale[size_t(r)][size_t(j / 256)] * x.q[size_t(r)][size_t(j)];
                exact += term, magnitude += std::abs(term);
              }
              ASSERT_NEAR(want, exact, 1e-6 * magnitude + 1e-30) << "x row " << r << " weight row " << i;
            }
        }
    }
}

// Where maddubs' int16 lanes are fullest (Q4_K: every nibble 15; Q5_K: 31;
// Q6_K: every value 63) against activations of +-127, with the largest
// scales (Q4_K, Q5_K: scales and mins 63; Q6_K: -128); and Q6_K's values
// 0 (q - 32 = -32: T at its bound, 2^24 - 2^17): exact still.
TEST(KQuants, ExtremeWeightsAndActivationsStayExact) {
  const int n = 512;
  const std::pair<const KQuant*, uint8_t> cases[] = {{&kQ4K, 0xff}, {&kQ5K, 0xff}, {&kQ6K, 0xff}, {&kQ6K, 0x00}};
  for (const auto& [f, value_bytes] : cases) {
    std::vector<uint8_t> bytes(size_t(16 * 2 * f->block_bytes));
    for (size_t b = 0; b < bytes.size() / size_t(f->block_bytes); ++b) {
      uint8_t* block = &bytes[b * size_t(f->block_bytes)];
      std::memset(block, value_bytes, size_t(f->block_bytes));
      if (f == &kQ6K) std::memset(block + 192, 0x80, 16);  // every sub-block scale -128
      for (size_t k = 0; k < f->factors.size(); ++k) {
        const uint16_t h = f32_to_f16(k == 0 ? 1.f : 0.5f);  // d = 1, Q4_K's dmin 0.5
        std::memcpy(block + f->factors[k], &h, 2);
      }
    }
    WeightMatrix rows = WeightMatrix::from_bytes(f->format, 16, n, bytes.data());
    rows.int8_activations = true;
    WeightMatrix grouped = rows;
    grouped.group_rows();
    for (float sign : {1.f, -1.f}) {
      const std::vector<float> v(size_t(n), sign);
      const QRows x = quantized(std::vector<std::vector<float>>(simd::kMaxGroupDotRows, v), n);
      ASSERT_EQ(x.q[0][0], int8_t(127 * sign));
      for (const simd::RowGroupKernels* k : simd::row_group_kernels_available())
        for (int count = 1; count <= simd::kMaxGroupDotRows; ++count) {
          SCOPED_TRACE(std::string(f->name) + " " + k->name + " sign " + std::to_string(sign) + " rows " + std::to_string(count));
          float outs[simd::kMaxGroupDotRows * 16];
          (k->*f->kernel)(x.rows.data(), count, grouped.group(0), n, outs);
          for (int i = 0; i < 16 * count; ++i) EXPECT_EQ(outs[i], f->contract(rows.row(i % 16), x.rows[0], n));
          const float* out = outs + 16 * (count - 1);
          if (f == &kQ4K)  // 16 sub-blocks of 32 x (63 x 15 x 127 - 31.5 x 127) x 1/127 each
            EXPECT_FLOAT_EQ(out[0], sign * 16 * 32 * (63.f * 15.f - 31.5f));
          else if (f == &kQ5K)  // the same with 31
            EXPECT_FLOAT_EQ(out[0], sign * 16 * 32 * (63.f * 31.f - 31.5f));
          else  // 16 blocks of -128 x 32 x (q - 32) x 127 x 1/127 each
            EXPECT_FLOAT_EQ(out[0], sign * 16 * -128.f * 32 * (value_bytes ? 31 : -32));
        }
    }
  }
}

// linear on a K-quant: grouped rows and the rows one at a time give the
// same bits (the same f32 steps), each sequence alone or batched, on every
// table; linear_batch the same.
TEST(KQuants, LinearGivesEachRowTheSameBitsGroupedOrNotAloneOrBatched) {
  std::mt19937 rng(4);
  for (const KQuant* f : kKQuants)
    for (auto [out, in] : {std::pair{16, 256}, {37, 512}, {300, 1280}, {1, 256}}) {
      const WeightMatrix rows = random_blocks(*f, rng, out, in);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      for (int count : {1, 2, 3, 4, 5, 8, 9, 15}) {
        const auto x = random_vec(rng, size_t(count) * size_t(in));
        for (const simd::KernelTable* t : simd::available()) {
          SCOPED_TRACE(std::string(f->name) + " " + t->name + " out " + std::to_string(out) + " in " + std::to_string(in) +
                       " rows " + std::to_string(count));
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

// Prefill on grouped K-quant rows: each prompt row gets exactly its decode
// bits; the f32 GEMM on the same quantized activations and the rows
// expanded (the path for ungrouped rows) agrees within f32 rounding; f32
// activations (q4_k_dot, q5_k_dot, q6_k_dot) give the float64 dot within f32 rounding;
// and the quantized activations' result is within their rounding of that dot
// (each activation off by at most half its 256-value block's step, amax / 127).
TEST(KQuants, PrefillAndFloatActivationsAgreeWithDecode) {
  std::mt19937 rng(5);
  for (const KQuant* f : kKQuants)
    for (auto [out, in, count] : {std::tuple{300, 256, 21}, {32, 512, 23}, {48, 1280, 5}}) {
      const WeightMatrix rows = random_blocks(*f, rng, out, in);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      WeightMatrix f32_activations = rows;
      f32_activations.int8_activations = false;
      auto x = random_vec(rng, size_t(count) * size_t(in));
      // Each 256-value block of a row 1, 4 or 16 times larger than the one
      // before: a scale taken from the wrong block would show.
      for (size_t j = 0; j < x.size(); ++j) x[j] *= float(1 << (j % size_t(in) / 256 % 3 * 2));
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
          double block_max = 0;
          double exact = 0, magnitude = 0, rounding = 0;
          for (int j = 0; j < in; ++j) {
            const double term = double(w[size_t(j)]) * x[size_t(r) * size_t(in) + size_t(j)];
            exact += term, magnitude += std::abs(term);
            if (j % 256 == 0) {
              block_max = 0;
              for (int k = j; k < j + 256; ++k) block_max = std::max(block_max, double(std::abs(x[size_t(r) * size_t(in) + size_t(k)])));
            }
            rounding += std::abs(double(w[size_t(j)])) * block_max / 127 / 2;
          }
          const size_t at = size_t(r) * size_t(out) + size_t(o);
          SCOPED_TRACE(std::string(f->name) + " row " + std::to_string(r) + " output " + std::to_string(o));
          if (grouped_prefill) {
            linear(x.data() + size_t(r) * size_t(in), 1, grouped, alone.data());
            ASSERT_EQ(prompt[at], alone[size_t(o)]);
          }
          ASSERT_NEAR(prompt[at], gemm[at], 1e-5 * magnitude);
          ASSERT_NEAR(float_x[at], exact, 1e-5 * magnitude);
          ASSERT_NEAR(prompt[at], exact, rounding + 1e-5 * magnitude);
        }
      }
    }
}
