#include "kernels/q4_k_rows.h"

#include "core/dtype.h"
#include "io/ggml_block_formats.h"

namespace splitdec {

namespace {
constexpr int kSuperBlock = 256, kSuperBlockBytes = 144;
}  // namespace

void q4_k_expand(const uint8_t* row, int n, float* dst) { dequantize_ggml_blocks(GgmlBlocks::Q4_K, row, dst, n); }

float q4_k_dot(const float* x, const uint8_t* row, int n) {
  float w[kSuperBlock], acc = 0;
  for (int sb = 0; sb < n / kSuperBlock; ++sb) {
    q4_k_expand(row + int64_t(sb) * kSuperBlockBytes, kSuperBlock, w);
    for (int t = 0; t < kSuperBlock; ++t) acc = std::fma(w[t], x[int64_t(sb) * kSuperBlock + t], acc);
  }
  return acc;
}

float q4_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n) {
  float acc = 0;
  for (int sb = 0; sb < n / kSuperBlock; ++sb) {
    const uint8_t* block = row + int64_t(sb) * kSuperBlockBytes;
    const float d = load_as_f32(DType::F16, block), dmin = load_as_f32(DType::F16, block + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      k_quant_scale_min(j, block + 4, &sc, &m);
      const int b = sb * 8 + j;
      const int8_t* xq = x_q + int64_t(b) * 32;
      const uint8_t* qs = block + 16 + 32 * (j / 2);
      int32_t sum = 0, x_sum = 0;
      for (int t = 0; t < 32; ++t) {
        sum += int32_t(j % 2 ? qs[t] >> 4 : qs[t] & 15) * xq[t];
        x_sum += xq[t];
      }
      acc = q4_k_step(acc, x_scale[b], d, dmin, sc, m, sum, x_sum);
    }
  }
  return acc;
}

}  // namespace splitdec
