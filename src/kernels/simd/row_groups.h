// Q4_0, Q8_0 and Q4_K weights in row groups (WeightMatrix::group_rows) against
// activation rows in Q8_0 form: the decode kernels of block-quantized
// weights.
//
// Why groups: a row-at-a-time block dot product spends most of its
// instructions unpacking and summing lanes horizontally (Q4_0 decode ran at
// 27-48% of its weight floor). With 16 rows' blocks side by side (4 bytes
// of each row per 32-bit lane), one broadcast of 4 activation bytes meets 16
// rows at once, every lane is one output, and nothing is summed across
// lanes: the integer product (vpdpbusd where the CPU has VNNI, maddubs +
// madd where not) is the whole inner loop, as in llama.cpp's repacked Q4_0.
//
// Every kernel below gives the same bits: per output and block, the exact
// integer sum of weight value x activation value (Q4_0: nibble - 8), as
// f32, times (weight scale x activation scale), added by one fma into that
// output's running sum, blocks in order. Q4_K, per 32-value sub-block j of
// activation block b: with S the exact sum of nibble x activation and X
// the exact sum of the activations,
//   inner = fma(d sc_j, S, -(dmin m_j X)),  acc = fma(x_scale[b], inner, acc)
// (d sc_j and dmin m_j are exact in f32: 11 x 6 bits). So an output does
// not depend on the instruction set, the other rows of the call, or the
// group's other rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

// Rows per group. A group holds the same bytes as its 16 rows' blocks,
// rearranged per block b (at b x 16 x block bytes): the 16 rows' f16 scales
// (row i at 2 i), then chunk c at 32 + 64 c holding bytes 4c .. 4c + 3 of
// each row's block values (row i at 4 i): 4 chunks for Q4_0's 16 nibble
// bytes, 8 for Q8_0's 32 values.
constexpr int kGroupRows = 16;
constexpr int kQ4GroupBlockBytes = kGroupRows * 18;
constexpr int kQ8GroupBlockBytes = kGroupRows * 34;
// Q4_K, per super-block b (at b x 16 x 144 bytes): the 16 rows' f16 d
// (row i at 2 i), their f16 dmin (at 32 + 2 i), byte k of their packed
// scales (at 64 + 16 k + i), then chunk c (0-31) at 256 + 64 c holding
// bytes 4c .. 4c + 3 of each row's qs (row i at 4 i). Chunk c's low
// nibbles are the super-block's values 64 (c / 8) + 4 (c % 8) + 0..3, its
// high nibbles the same plus 32.
constexpr int kQ4KGroupBlockBytes = kGroupRows * 144;

// One activation row in Q8_0 form: scale[n / 32], q[n] (-127 .. 127);
// q_offset[n] = q + 128 (the unsigned operand for Q8_0's signed weights);
// eight_sum[b] = 8 x the sum of block b's q (Q4_0's nibble offset);
// sum[b] = the sum of block b's q (Q4_K's mins). Each needs to be there
// only for the format whose kernels read it (else null).
struct Q8Row {
  const float* scale;
  const int8_t* q;
  const uint8_t* q_offset;
  const int32_t* eight_sum;
  const int32_t* sum = nullptr;
};

// out[r * 16 + i] = x[r] . row i of the group, for `rows` (1-4) activation
// rows; n weights per row (a multiple of 32).
using GroupDot = void (*)(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);

struct RowGroupKernels {
  const char* name;
  GroupDot q4;
  GroupDot q8;
  GroupDot q4_k;  // n a multiple of 256
};

// The kernels that go with a SIMD table on this CPU (VNNI where present;
// SPLITDEC_VNNI=0 keeps them off, to measure a CPU without).
const RowGroupKernels& row_group_kernels(const KernelTable& table);
// Every set this CPU runs, the scalar one first (for the tests).
std::vector<const RowGroupKernels*> row_group_kernels_available();

// Per instruction set (row_groups_*.cpp); call only where the CPU has it.
#define SPLITDEC_ROW_GROUP_KERNELS(suffix)                                                   \
  void q4_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q8_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q4_k_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
SPLITDEC_ROW_GROUP_KERNELS(generic)
SPLITDEC_ROW_GROUP_KERNELS(avx2)
SPLITDEC_ROW_GROUP_KERNELS(avx_vnni)
SPLITDEC_ROW_GROUP_KERNELS(avx512)
SPLITDEC_ROW_GROUP_KERNELS(avx512_vnni)
#undef SPLITDEC_ROW_GROUP_KERNELS

}  // namespace splitdec::simd
