#include "kernels/k_quant_rows.h"

#include "core/dtype.h"
#include "io/ggml_block_formats.h"

namespace splitdec {

namespace {
constexpr int kSuperBlock = 256, kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;

// x . row with the row expanded a super-block at a time, products in order.
float expanded_dot(GgmlBlocks format, int block_bytes, const float* x, const uint8_t* row, int n) {
  float w[kSuperBlock], acc = 0;
  for (int sb = 0; sb < n / kSuperBlock; ++sb) {
    dequantize_ggml_blocks(format, row + int64_t(sb) * block_bytes, w, kSuperBlock);
    for (int t = 0; t < kSuperBlock; ++t) acc = std::fma(w[t], x[int64_t(sb) * kSuperBlock + t], acc);
  }
  return acc;
}
}  // namespace

void q4_k_expand(const uint8_t* row, int n, float* dst) { dequantize_ggml_blocks(GgmlBlocks::Q4_K, row, dst, n); }
void q5_k_expand(const uint8_t* row, int n, float* dst) { dequantize_ggml_blocks(GgmlBlocks::Q5_K, row, dst, n); }
void q6_k_expand(const uint8_t* row, int n, float* dst) { dequantize_ggml_blocks(GgmlBlocks::Q6_K, row, dst, n); }

float q4_k_dot(const float* x, const uint8_t* row, int n) { return expanded_dot(GgmlBlocks::Q4_K, kQ4KBytes, x, row, n); }
float q5_k_dot(const float* x, const uint8_t* row, int n) { return expanded_dot(GgmlBlocks::Q5_K, kQ5KBytes, x, row, n); }
float q6_k_dot(const float* x, const uint8_t* row, int n) { return expanded_dot(GgmlBlocks::Q6_K, kQ6KBytes, x, row, n); }

namespace {
// Q4_K, or Q5_K with the fifth bits from qh (weight_matrix.h's layouts).
template <bool kFive>
float k_quant_min_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n) {
  const int block_bytes = kFive ? kQ5KBytes : kQ4KBytes;
  float acc = 0;
  for (int sb = 0; sb < n / kSuperBlock; ++sb) {
    const uint8_t* block = row + int64_t(sb) * block_bytes;
    const float d = load_as_f32(DType::F16, block), dmin = load_as_f32(DType::F16, block + 2);
    int32_t scaled_sum = 0, min_sum = 0;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k_quant_scale_min(j, block + 4, &sc, &m);
      const int8_t* xq = x_q + int64_t(sb) * kSuperBlock + 32 * j;
      const uint8_t* qh = block + 16;
      const uint8_t* qs = block + (kFive ? 48 : 16) + 32 * (j / 2);
      int32_t sum = 0, x_sum = 0;
      for (int t = 0; t < 32; ++t) {
        const int fifth = kFive ? (qh[t] >> j & 1) << 4 : 0;
        sum += int32_t((j % 2 ? qs[t] >> 4 : qs[t] & 15) | fifth) * xq[t];
        x_sum += xq[t];
      }
      scaled_sum += sc * sum, min_sum += m * x_sum;
    }
    acc = q4_k_step(acc, x_scale[sb], d, dmin, scaled_sum, min_sum);
  }
  return acc;
}
}  // namespace

float q4_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n) {
  return k_quant_min_dot_q8<false>(x_scale, x_q, row, n);
}
float q5_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n) {
  return k_quant_min_dot_q8<true>(x_scale, x_q, row, n);
}

float q6_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n) {
  float acc = 0;
  for (int sb = 0; sb < n / kSuperBlock; ++sb) {
    const uint8_t* block = row + int64_t(sb) * kQ6KBytes;
    const float d = load_as_f32(DType::F16, block + 208);
    int32_t t = 0;
    for (int m = 0; m < 8; ++m) {  // activation block m: half h, quarter k
      const int h = m / 4, k = m % 4;
      const uint8_t* ql = block + 64 * h + 32 * (k % 2);
      const uint8_t* qh = block + 128 + 32 * h;
      const int8_t* xq = x_q + int64_t(sb) * kSuperBlock + 32 * m;
      for (int half = 0; half < 2; ++half) {
        int32_t sum = 0, x_sum = 0;
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q = ((k < 2 ? ql[l] : ql[l] >> 4) & 15) | (((qh[l] >> (2 * k)) & 3) << 4);
          sum += q * xq[l];
          x_sum += xq[l];
        }
        t += int32_t(int8_t(block[192 + 2 * m + half])) * (sum - 32 * x_sum);
      }
    }
    acc = q6_k_step(acc, x_scale[sb], d, t);
  }
  return acc;
}

}  // namespace splitdec
