// Q4_0 and Q8_0 rows in groups of 16 (WeightMatrix::group_rows,
// simd/row_groups.h): the layout round-trips, every kernel this CPU runs
// gives the scalar kernel's bits and the exact block sums, and the linear
// layer on grouped rows keeps each sequence's bits and agrees with the
// ungrouped rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <tuple>
#include <string>

#include "core/dtype.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"
#include "kernels/row_kernels.h"
#include "kernels/simd/kernel_table.h"
#include "kernels/simd/row_groups.h"
#include "random_values.h"

using namespace splitdec;
using test::random_vec;

namespace {

constexpr WeightFormat kFormats[] = {WeightFormat::Q4_0, WeightFormat::Q8_0};

WeightMatrix block_matrix(WeightFormat format, std::mt19937& rng, int out, int in) {
  const auto wf = random_vec(rng, size_t(out) * size_t(in));
  WeightMatrix w = WeightMatrix::from_f32(format, out, in, wf.data());
  w.int8_activations = true;
  return w;
}

// Activation rows in Q8_0 form, as linear() makes them for `format`'s
// row groups (offset_sum: -8 or -128 x each block's sum of q).
struct QRows {
  std::vector<std::vector<float>> scale;
  std::vector<std::vector<int8_t>> q;
  std::vector<std::vector<int32_t>> offset_sum;
  std::vector<simd::Q8Row> rows;
};
QRows quantized(const std::vector<std::vector<float>>& xs, int n, WeightFormat format) {
  QRows r;
  const int32_t offset = format == WeightFormat::Q4_0 ? 8 : 128;
  for (const auto& x : xs) {
    r.scale.emplace_back(size_t(n / 32));
    r.q.emplace_back(size_t(n));
    simd::generic_table().quantize_q8_activations(x.data(), n, 32, r.scale.back().data(), r.q.back().data());
    r.offset_sum.emplace_back(size_t(n / 32));
    for (int b = 0; b < n / 32; ++b) {
      int32_t s = 0;
      for (int j = 0; j < 32; ++j) s += r.q.back()[size_t(b * 32 + j)];
      r.offset_sum.back()[size_t(b)] = -offset * s;
    }
  }
  for (size_t k = 0; k < xs.size(); ++k) r.rows.push_back({r.scale[k].data(), r.q[k].data(), r.offset_sum[k].data()});
  return r;
}

// The kernels' contract written from the row layout: per block the exact
// sum of weight value (Q4_0: nibble - 8) x q, times (d x x_scale) in f32,
// fma'd in block order.
float exact_order(WeightFormat format, const uint8_t* row, const simd::Q8Row& x, int n) {
  float acc = 0;
  const int block_bytes = format == WeightFormat::Q4_0 ? 18 : 34;
  for (int b = 0; b < n / 32; ++b) {
    const uint8_t* block = row + b * block_bytes;
    int64_t sum = 0;
    if (format == WeightFormat::Q8_0)
      for (int j = 0; j < 32; ++j) sum += int64_t(int8_t(block[2 + j])) * x.q[b * 32 + j];
    else
      for (int j = 0; j < 16; ++j)
        sum += int64_t((block[2 + j] & 15) - 8) * x.q[b * 32 + j] + int64_t((block[2 + j] >> 4) - 8) * x.q[b * 32 + 16 + j];
    uint16_t d;
    std::memcpy(&d, block, 2);
    acc = std::fma(f16_to_f32(d) * x.scale[b], float(sum), acc);
  }
  return acc;
}
}  // namespace

TEST(RowGroups, LayoutRoundTripsEveryRow) {
  std::mt19937 rng(1);
  for (WeightFormat format : kFormats)
    for (int out : {1, 15, 16, 17, 33, 48})
      for (int in : {32, 96, 1152}) {
        SCOPED_TRACE(std::string(weight_format_name(format)) + " out " + std::to_string(out) + " in " + std::to_string(in));
        const WeightMatrix rows = block_matrix(format, rng, out, in);
        WeightMatrix grouped = rows;
        grouped.group_rows();
        EXPECT_EQ(grouped.grouped_rows, out / 16 * 16);
        EXPECT_EQ(grouped.bytes(), rows.bytes());
        std::vector<uint8_t> got(rows.row_bytes());
        std::vector<float> f_rows(static_cast<size_t>(in)), f_grouped(static_cast<size_t>(in));
        for (int o = 0; o < out; ++o) {
          grouped.copy_row(o, got.data());
          ASSERT_EQ(0, std::memcmp(got.data(), rows.row(o), got.size())) << "row " << o;
          rows.row_f32(o, f_rows.data());
          grouped.row_f32(o, f_grouped.data());
          ASSERT_EQ(f_rows, f_grouped) << "row " << o;
        }
        if (out >= 16) {  // row i's block b: its scale at 16 B b + 2 i, its value byte 4c + k at 16 B b + 32 + 64 c + 4 i + k
          const int B = format == WeightFormat::Q4_0 ? 18 : 34, i = 5, b = in / 32 - 1, c = B == 18 ? 3 : 7, k = 2;
          const uint8_t offset = format == WeightFormat::Q8_0 ? 0x80 : 0;  // Q8_0 grouped as w + 128
          EXPECT_EQ(0, std::memcmp(grouped.group(0) + 16 * B * b + 2 * i, rows.row(i) + B * b, 2));
          EXPECT_EQ(grouped.group(0)[16 * B * b + 32 + 64 * c + 4 * i + k], uint8_t(rows.row(i)[B * b + 2 + 4 * c + k] ^ offset));
        }
      }
  // Only block formats with int8 activations are grouped; grouping twice changes nothing.
  std::mt19937 rng2(2);
  WeightMatrix f32_activations = block_matrix(WeightFormat::Q4_0, rng2, 32, 64);
  f32_activations.int8_activations = false;
  f32_activations.group_rows();
  EXPECT_EQ(f32_activations.grouped_rows, 0);
  const auto wf = random_vec(rng2, 32 * 64);
  WeightMatrix bf16 = WeightMatrix::from_f32(WeightFormat::BF16, 32, 64, wf.data());
  bf16.int8_activations = true;
  bf16.group_rows();
  EXPECT_EQ(bf16.grouped_rows, 0);
  WeightMatrix twice = block_matrix(WeightFormat::Q8_0, rng2, 32, 64);
  twice.group_rows();
  const WeightMatrix once = twice;
  twice.group_rows();
  EXPECT_EQ(0, std::memcmp(once.data.data(), twice.data.data(), once.bytes()));
}

simd::GroupDot dot_of(const simd::RowGroupKernels& k, WeightFormat format) { return format == WeightFormat::Q4_0 ? k.q4 : k.q8; }

TEST(RowGroups, EveryKernelGivesTheExactBlockSumsInOrderBitForBit) {
  std::mt19937 rng(3);
  for (WeightFormat format : kFormats)
    for (int n : {32, 64, 96, 288, 1152, 4128}) {
      const WeightMatrix rows = block_matrix(format, rng, 16, n);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < simd::kMaxGroupDotRows; ++r) xs.push_back(random_vec(rng, size_t(n), r == 3 ? 1e-3f : 2.f));
      const QRows x = quantized(xs, n, format);
      for (const simd::RowGroupKernels* k : simd::row_group_kernels_available())
        for (int count = 1; count <= simd::kMaxGroupDotRows; ++count) {
          SCOPED_TRACE(std::string(k->name) + " " + weight_format_name(format) + " n " + std::to_string(n) + " rows " +
                       std::to_string(count));
          std::vector<float> out(size_t(count) * 16, -1.f);
          dot_of(*k, format)(x.rows.data(), count, grouped.group(0), n, out.data());
          std::vector<float> wrow(static_cast<size_t>(n));
          for (int r = 0; r < count; ++r)
            for (int i = 0; i < 16; ++i) {
              const float want = exact_order(format, rows.row(i), x.rows[size_t(r)], n);
              ASSERT_EQ(out[size_t(r * 16 + i)], want) << "x row " << r << " weight row " << i;
              // ... which is the dot product of the dequantized values within f32 rounding.
              double exact = 0;
              rows.row_f32(i, wrow.data());
              for (int j = 0; j < n; ++j)
                exact += double(wrow[size_t(j)]) * x.scale[size_t(r)][size_t(j / 32)] * x.q[size_t(r)][size_t(j)];
              ASSERT_NEAR(want, exact, 1e-5 * (1 + std::abs(exact)) * std::sqrt(double(n)));
            }
        }
    }
}

// The pair kernels (two adjacent groups a call, the broadcasts shared):
// each of the 32 outputs has the same bits as the one-group kernels'.
TEST(RowGroups, PairKernelsGiveBothGroupsTheirBits) {
  std::mt19937 rng(5);
  for (WeightFormat format : kFormats)
    for (int n : {32, 96, 1152}) {
      const WeightMatrix rows = block_matrix(format, rng, 48, n);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      std::vector<std::vector<float>> xs;
      for (int r = 0; r < simd::kMaxGroupDotRows; ++r) xs.push_back(random_vec(rng, size_t(n), r == 2 ? 1e-3f : 2.f));
      const QRows x = quantized(xs, n, format);
      for (const simd::RowGroupKernels* k : simd::row_group_kernels_available())
        for (int count = 1; count <= simd::kMaxGroupDotRows; ++count)
          for (int first : {0, 1}) {  // groups 0 and 1, then 1 and 2
            SCOPED_TRACE(std::string(k->name) + " " + weight_format_name(format) + " n " + std::to_string(n) + " rows " +
                         std::to_string(count) + " from group " + std::to_string(first));
            std::vector<float> out(size_t(count) * 32, -1.f);
            (format == WeightFormat::Q4_0 ? k->q4_pair : k->q8_pair)(x.rows.data(), count, grouped.group(first), n, out.data());
            for (int r = 0; r < count; ++r)
              for (int i = 0; i < 32; ++i)
                ASSERT_EQ(out[size_t(r * 32 + i)], exact_order(format, rows.row(16 * first + i), x.rows[size_t(r)], n))
                    << "x row " << r << " output " << i;
          }
    }
}

// The integer sums at their extremes, where the maddubs kernels' int16
// lanes and pairs are fullest: every Q4_0 nibble 15 (or 0), every Q8_0
// value +-127, against every activation at +-127.
TEST(RowGroups, ExtremeWeightsAndActivationsStayExact) {
  const int n = 64;
  const uint16_t one = f32_to_f16(1.f);
  for (WeightFormat format : kFormats) {
    const size_t B = weight_row_bytes(format, 32);
    const std::vector<uint8_t> fills = format == WeightFormat::Q4_0 ? std::vector<uint8_t>{0xff, 0x00, 0xf0}
                                                                     : std::vector<uint8_t>{0x7f, 0x81, 0x00};
    for (uint8_t fill : fills)
      for (float sign : {1.f, -1.f}) {
        std::vector<uint8_t> bytes(16 * size_t(n / 32) * B);
        for (size_t b = 0; b < bytes.size() / B; ++b) {
          std::memcpy(&bytes[b * B], &one, 2);
          std::memset(&bytes[b * B + 2], fill, B - 2);
        }
        WeightMatrix rows = WeightMatrix::from_bytes(format, 16, n, bytes.data());
        rows.int8_activations = true;
        WeightMatrix grouped = rows;
        grouped.group_rows();
        const QRows x = quantized({std::vector<float>(size_t(n), sign)}, n, format);
        ASSERT_EQ(x.q[0][0], int8_t(127 * sign));
        for (const simd::RowGroupKernels* k : simd::row_group_kernels_available()) {
          float out[16];
          dot_of(*k, format)(x.rows.data(), 1, grouped.group(0), n, out);
          for (int i = 0; i < 16; ++i)
            EXPECT_EQ(out[i], exact_order(format, rows.row(i), x.rows[0], n))
                << k->name << " " << weight_format_name(format) << " byte " << int(fill);
        }
      }
  }
}

// linear on grouped rows: each sequence's bits alone or in a batch (every
// table), the same bits through linear_batch, and the ungrouped int8
// kernels' results within f32 rounding (they sum in another order).
TEST(RowGroups, LinearKeepsEachRowsBitsAndAgreesWithTheRowKernels) {
  std::mt19937 rng(4);
  for (WeightFormat format : kFormats)
    for (auto [out, in] : {std::pair{16, 32}, {37, 64}, {300, 1152}, {1, 96}}) {
      const WeightMatrix rows = block_matrix(format, rng, out, in);
      WeightMatrix grouped = rows;
      grouped.group_rows();
      for (int count : {1, 2, 3, 4, 5, 8, 9, 15}) {
        const auto x = random_vec(rng, size_t(count) * size_t(in));
        for (const simd::KernelTable* t : simd::available()) {
          SCOPED_TRACE(std::string(t->name) + " " + weight_format_name(format) + " out " + std::to_string(out) + " in " +
                       std::to_string(in) + " rows " + std::to_string(count));
          std::vector<float> batch(size_t(count) * size_t(out)), solo(static_cast<size_t>(out)), ungrouped(batch.size());
          linear_with(*t, x.data(), count, grouped, batch.data());
          linear_with(*t, x.data(), count, rows, ungrouped.data());
          for (int r = 0; r < count; ++r) {
            linear_with(*t, x.data() + size_t(r) * size_t(in), 1, grouped, solo.data());
            for (int o = 0; o < out; ++o) {
              const size_t at = size_t(r) * size_t(out) + size_t(o);
              ASSERT_EQ(batch[at], solo[size_t(o)]) << "row " << r << " output " << o;
              ASSERT_NEAR(batch[at], ungrouped[at], 2e-5 * (1 + std::abs(ungrouped[at])) * std::sqrt(double(in))) << "output " << o;
            }
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

// Prefill on grouped rows takes the row-group kernels too: each prompt row
// gets exactly its decode result (so chunking cannot change a prompt's
// logits), within f32 rounding of the float GEMM on the rows as stored.
TEST(RowGroups, PrefillOnGroupedRowsGivesEachRowItsDecodeBits) {
  if (const char* v = std::getenv("SPLITDEC_GROUP_PREFILL"); v && std::string(v) == "0") GTEST_SKIP() << "SPLITDEC_GROUP_PREFILL=0";
  if (std::string(simd::best().name) == "generic") GTEST_SKIP() << "the scalar table keeps BLAS in prefill";
  std::mt19937 rng(5);
  for (WeightFormat format : kFormats) {
    for (auto [out, in, count] : {std::tuple{300, 96, 21}, {128, 64, 26}, {32, 64, 23}}) {
    const WeightMatrix rows = block_matrix(format, rng, out, in);
    WeightMatrix grouped = rows;
    grouped.group_rows();
    const auto x = random_vec(rng, size_t(count) * size_t(in));
    std::vector<float> prompt(size_t(count) * size_t(out)), gemm(prompt.size()), alone(static_cast<size_t>(out));
    linear(x.data(), count, grouped, prompt.data());
    {
      const ExactGemmOnThisThread exact;
      linear(x.data(), count, rows, gemm.data());
    }
    for (int r = 0; r < count; ++r) {
      linear(x.data() + size_t(r) * size_t(in), 1, grouped, alone.data());
      for (int o = 0; o < out; ++o) {
        const size_t at = size_t(r) * size_t(out) + size_t(o);
        ASSERT_EQ(prompt[at], alone[size_t(o)]) << weight_format_name(format) << " row " << r << " output " << o;
        ASSERT_NEAR(prompt[at], gemm[at], 2e-5 * (1 + std::abs(gemm[at])) * std::sqrt(double(in)));
      }
    }
    }
  }
}
