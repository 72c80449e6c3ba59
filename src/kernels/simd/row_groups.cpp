// The scalar row-group kernels (the reference the vector ones match bit for
// bit) and the choice of kernels per SIMD table.
#include "kernels/simd/row_groups.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/env_switch.h"
#include "io/ggml_block_formats.h"
#include "kernels/k_quant_rows.h"

namespace splitdec::simd {

namespace {
// Output i of a group against one activation row, the block sums given by
// `block_sum(block, i, xq, b)`; the f32 steps every kernel takes.
template <int kBlockBytes, class BlockSum>
float group_row_dot(const Q8Row& x, const uint8_t* group, int i, int n, BlockSum block_sum) {
  float acc = 0;
  for (int b = 0; b < n / 32; ++b) {
    const uint8_t* block = group + int64_t(b) * kBlockBytes;
    uint16_t d;
    std::memcpy(&d, block + 2 * i, 2);
    const float scale = f16_to_f32(d) * x.scale[b];
    acc = std::fma(scale, float(block_sum(block, x.q + int64_t(b) * 32)), acc);
  }
  return acc;
}
}  // namespace

void q4_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < kGroupRows; ++i)
      out[r * kGroupRows + i] = group_row_dot<kQ4GroupBlockBytes>(x[r], group, i, n, [&](const uint8_t* block, const int8_t* xq) {
        int32_t sum = 0;
        for (int c = 0; c < 4; ++c)
          for (int k = 0; k < 4; ++k) {
            const uint8_t byte = block[32 + 64 * c + 4 * i + k];
            sum += int32_t((byte & 15) - 8) * xq[4 * c + k] + int32_t((byte >> 4) - 8) * xq[16 + 4 * c + k];
          }
        return sum;
      });
}

void q8_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < kGroupRows; ++i)
      out[r * kGroupRows + i] = group_row_dot<kQ8GroupBlockBytes>(x[r], group, i, n, [&](const uint8_t* block, const int8_t* xq) {
        int32_t sum = 0;
        for (int c = 0; c < 8; ++c)
          for (int k = 0; k < 4; ++k) sum += (int32_t(block[32 + 64 * c + 4 * i + k]) - 128) * xq[4 * c + k];  // stored w + 128
        return sum;
      });
}

void group_pair_dot_in_two_calls(GroupDot one, int block_bytes, const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  float each[kMaxGroupDotRows * kGroupRows];
  for (int g = 0; g < 2; ++g) {
    one(x, rows, group + int64_t(g) * (n / 32) * block_bytes, n, each);
    for (int r = 0; r < rows; ++r) std::memcpy(out + (2 * r + g) * kGroupRows, each + r * kGroupRows, sizeof(float) * kGroupRows);
  }
}
void q4_group_pair_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  group_pair_dot_in_two_calls(q4_group_dot_generic, kQ4GroupBlockBytes, x, rows, group, n, out);
}
void q8_group_pair_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  group_pair_dot_in_two_calls(q8_group_dot_generic, kQ8GroupBlockBytes, x, rows, group, n, out);
}

namespace {
// Q4_K, or Q5_K with the fifth bits from qh (row_groups.h's layouts).
template <bool kFive>
void k_quant_min_group_dot(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < kGroupRows; ++i) {
      float acc = 0;
      for (int sb = 0; sb < n / 256; ++sb) {
        const uint8_t* block = group + int64_t(sb) * (kFive ? kQ5KGroupBlockBytes : kQ4KGroupBlockBytes);
        uint16_t d16, dmin16;
        std::memcpy(&d16, block + 2 * i, 2);
        std::memcpy(&dmin16, block + 32 + 2 * i, 2);
        uint8_t packed[12];
        for (int k = 0; k < 12; ++k) packed[k] = block[64 + 16 * k + i];
        int32_t scaled_sum = 0, min_sum = 0;
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          k_quant_scale_min(j, packed, &sc, &m);
          const int8_t* xq = x[r].q + int64_t(sb) * 256 + 32 * j;
          int32_t sum = 0;
          for (int c = 0; c < 8; ++c)
            for (int t = 0; t < 4; ++t) {
              const uint8_t byte = block[256 + 64 * (8 * (j / 2) + c) + 4 * i + t];
              const int fifth = kFive ? (block[2304 + 64 * c + 4 * i + t] >> j & 1) << 4 : 0;
              sum += int32_t((j % 2 ? byte >> 4 : byte & 15) | fifth) * xq[4 * c + t];
            }
          const int32_t pair = x[r].sum_pairs[sb * 4 + j / 2];  // int16 halves: blocks 2p, 2p + 1
          scaled_sum += sc * sum, min_sum += m * int32_t(int16_t(j % 2 ? uint32_t(pair) >> 16 : uint32_t(pair) & 0xffff));
        }
        acc = q4_k_step(acc, x[r].scale[sb], f16_to_f32(d16), f16_to_f32(dmin16), scaled_sum, min_sum);
      }
      out[r * kGroupRows + i] = acc;
    }
}
}  // namespace

void q4_k_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  k_quant_min_group_dot<false>(x, rows, group, n, out);
}
void q5_k_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  k_quant_min_group_dot<true>(x, rows, group, n, out);
}

void q6_k_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < kGroupRows; ++i) {
      float acc = 0;
      for (int sb = 0; sb < n / 256; ++sb) {
        const uint8_t* block = group + int64_t(sb) * kQ6KGroupBlockBytes;
        uint16_t d16;
        std::memcpy(&d16, block + 2 * i, 2);
        int32_t t = 0;
        for (int m = 0; m < 8; ++m) {
          const int h = m / 4, k = m % 4;
          const int8_t* xq = x[r].q + int64_t(sb) * 256 + 32 * m;
          for (int half = 0; half < 2; ++half) {
            int32_t sum = 0, x_sum = 0;
            for (int c = 4 * half; c < 4 * half + 4; ++c)
              for (int u = 0; u < 4; ++u) {
                const uint8_t ql = block[288 + 64 * (16 * h + 8 * (k % 2) + c) + 4 * i + u];
                const uint8_t qh = block[2336 + 64 * (8 * h + c) + 4 * i + u];
                const int q = ((k < 2 ? ql : ql >> 4) & 15) | (((qh >> (2 * k)) & 3) << 4);
                sum += q * xq[4 * c + u];
                x_sum += xq[4 * c + u];
              }
            t += int32_t(int8_t(block[32 + 32 * m + 2 * i + half])) * (sum - 32 * x_sum);
          }
        }
        acc = q6_k_step(acc, x[r].scale[sb], f16_to_f32(d16), t);
      }
      out[r * kGroupRows + i] = acc;
    }
}

namespace {
#define SPLITDEC_ROW_GROUP_SET(name, suffix)                                                                  \
  {name, q4_group_dot_##suffix, q8_group_dot_##suffix, q4_group_pair_dot_##suffix, q8_group_pair_dot_##suffix, \
   q4_k_group_dot_##suffix, q5_k_group_dot_##suffix, q6_k_group_dot_##suffix}
const RowGroupKernels kGeneric SPLITDEC_ROW_GROUP_SET("generic", generic);
const RowGroupKernels kAvx2 SPLITDEC_ROW_GROUP_SET("avx2", avx2);
const RowGroupKernels kAvxVnni SPLITDEC_ROW_GROUP_SET("avx-vnni", avx_vnni);
const RowGroupKernels kAvx512 SPLITDEC_ROW_GROUP_SET("avx512", avx512);
const RowGroupKernels kAvx512Vnni SPLITDEC_ROW_GROUP_SET("avx512-vnni", avx512_vnni);
#undef SPLITDEC_ROW_GROUP_SET

bool vnni_allowed() {
  static const bool allowed = env_switch_on("SPLITDEC_VNNI");
  return allowed;
}
bool has_avx_vnni() { return __builtin_cpu_supports("avxvnni"); }
bool has_avx512_vnni() { return __builtin_cpu_supports("avx512vnni"); }
}  // namespace

const RowGroupKernels& row_group_kernels(const KernelTable& table) {
  if (std::strcmp(table.name, "avx512") == 0) return vnni_allowed() && has_avx512_vnni() ? kAvx512Vnni : kAvx512;
  if (std::strcmp(table.name, "avx2") == 0) return vnni_allowed() && has_avx_vnni() ? kAvxVnni : kAvx2;
  return kGeneric;
}

std::vector<const RowGroupKernels*> row_group_kernels_available() {
  std::vector<const RowGroupKernels*> all{&kGeneric};
  for (const KernelTable* t : available()) {
    if (std::strcmp(t->name, "avx2") == 0) {
      all.push_back(&kAvx2);
      if (has_avx_vnni()) all.push_back(&kAvxVnni);
    }
    if (std::strcmp(t->name, "avx512") == 0) {
      all.push_back(&kAvx512);
      if (has_avx512_vnni()) all.push_back(&kAvx512Vnni);
    }
  }
  return all;
}

}  // namespace splitdec::simd
