// Q4_0, Q8_0 and the K-quants Q4_K, Q5_K, Q6_K in row groups (WeightMatrix::group_rows) against
// activation rows in Q8_0 form (Q8_K for the K-quants): the decode kernels of block-quantized
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
// Every kernel below gives the same bits. Q4_0 and Q8_0, against
// activations with a scale per 32 values: per output and block, the exact
// integer sum of weight value x activation value (Q4_0: nibble - 8), as
// f32, times (weight scale x activation scale), added by one fma into that
// output's running sum, blocks in order. The K-quants, against activations
// with one scale s per 256-value super-block (as llama.cpp's Q8_K: the
// per-32 f32 step cost the AVX2 Q4_K pass a third of its instructions),
// per super-block in order, with exact int32 sums (bounds below):
// Q4_K and Q5_K, with S_j the sum of weight value (nibble, or 5-bit value)
// x activation over 32-value sub-block j and X_j the sum of its
// activations,
//   S = sum_j sc_j S_j,  M = sum_j m_j X_j,
//   acc = fma(s, fma(d, float(S), -(dmin x float(M))), acc)
// (|S| <= 8 x 63 x 32 x 31 x 127 < 2^31; |M| < 2^24, exact in f32; float(S)
// rounds to nearest, the same on every table). Q6_K, per 32-value
// activation block m (two 16-value sub-blocks with signed scales sc_0,
// sc_1) the integer
//   T_m = sc_0 (S_0 - 32 X_0) + sc_1 (S_1 - 32 X_1),  acc = fma(d x s, float(sum_m T_m), acc)
// (S: sum of q x with q the unsigned 6-bit value, X: sum of the
// activations, per sub-block; |T_m| <= 2 x 128 x 16 x 32 x 127 < 2^24, so
// |sum_m T_m| < 2^27). So an output does not depend on the instruction
// set, the other rows of the call, or the group's other rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

// Rows per group. A group holds the same bytes as its 16 rows' blocks,
// rearranged per block b (at b x 16 x block bytes): the 16 rows' f16 scales
// (row i at 2 i), then chunk c at 32 + 64 c holding bytes 4c .. 4c + 3 of
// each row's block values (row i at 4 i): 4 chunks for Q4_0's 16 nibble
// bytes, 8 for Q8_0's 32 values, stored unsigned as w + 128 (w ^ 0x80: the
// unsigned operand of vpdpbusd; the activations are the signed one).
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
// Q5_K: Q4_K's layout (its qs chunks at 256 + 64 c), then qh chunk c (0-7)
// at 2304 + 64 c holding bytes 4c .. 4c + 3 of each row's qh (row i at
// 4 i); bit j of qh byte t is the fifth bit of sub-block j's value t.
constexpr int kQ5KGroupBlockBytes = kGroupRows * 176;
// Q6_K, per super-block b (at b x 16 x 210 bytes): the 16 rows' f16 d (row
// i at 2 i); then per activation block m (0-7) the rows' two int8
// sub-block scales sc_2m, sc_2m+1 (at 32 + 32 m + 2 i); then ql chunk c
// (0-31) at 288 + 64 c and qh chunk c (0-15) at 2336 + 64 c, each holding
// bytes 4c .. 4c + 3 of each row's ql / qh (row i at 4 i). Block m = 4 h +
// k (weight_matrix.h's half and quarter) takes ql chunks 16 h + 8 (k % 2)
// + 0..7 (low nibbles for k < 2, high ones else) and qh chunks 8 h + 0..7
// (bits 2k, 2k + 1).
constexpr int kQ6KGroupBlockBytes = kGroupRows * 210;

// One activation row, q[n] (-127 .. 127) with scale[n / 32] (Q8_0 form,
// for Q4_0 and Q8_0 weights) or scale[n / 256] (Q8_K form, for the
// K-quants: a scale per weight block either way). Per 32-value block b:
// offset_sum[b] = -(the weights' offset) x the sum of block b's q: -8 x
// for Q4_0's nibbles, -128 x for Q8_0's grouped w + 128 (the integer
// sums start there); sum_pairs[p] = the sums of blocks 2p and 2p + 1 as
// int16 in one int32 (first in the low 16 bits; Q4_K's and Q5_K's mins);
// half_sums[b] = the sums of its two 16-value halves, packed the same way
// (Q6_K's offset of 32). Each needs to be there only for the format whose
// kernels read it (else null).
struct Q8Row {
  const float* scale;
  const int8_t* q;
  const int32_t* offset_sum;
  const int32_t* sum_pairs = nullptr;
  const int32_t* half_sums = nullptr;
};
// Two block sums (|sum| <= 32 x 127) as int16 in one int32: half_sums,
// sum_pairs.
inline int32_t pack_int16_pair(int32_t first, int32_t second) {
  return int32_t(uint32_t(uint16_t(int16_t(first))) | (uint32_t(uint16_t(int16_t(second))) << 16));
}

// out[r * 16 + i] = x[r] . row i of the group, for `rows` (1 to
// kMaxGroupDotRows) activation rows; n weights per row (a multiple of 32).
// Why 8: the Q4_0 / Q8_0 kernels meet each block with all of a call's rows
// before the next (row_groups_x86.inc's dot_rows), so an 8-sequence decode
// step reads the weights in one pass; the K-quant kernels take the rows in
// fours.
constexpr int kMaxGroupDotRows = 8;
using GroupDot = void (*)(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);

struct RowGroupKernels {
  const char* name;
  GroupDot q4;
  GroupDot q8;
  // Two adjacent groups (rows 16 g .. 16 g + 31 from `group`, the second at
  // group + 16 x row bytes): out[r * 32 + i]. The same bits as two calls
  // of q4 / q8; the 512-bit kernels share each activation broadcast
  // between the two groups.
  GroupDot q4_pair;
  GroupDot q8_pair;
  GroupDot q4_k;  // n a multiple of 256
  GroupDot q5_k;  // n a multiple of 256
  GroupDot q6_k;  // n a multiple of 256
};

// A pair kernel made of two calls of `one` (Q4_0 or Q8_0 blocks of
// block_bytes per group block), for the kernels that gain nothing from
// sharing broadcasts.
void group_pair_dot_in_two_calls(GroupDot one, int block_bytes, const Q8Row* x, int rows, const uint8_t* group, int n, float* out);

// The kernels that go with a SIMD table on this CPU (VNNI where present;
// SPLITDEC_VNNI=0 keeps them off, to measure a CPU without).
const RowGroupKernels& row_group_kernels(const KernelTable& table);
// Every set this CPU runs, the scalar one first (for the tests).
std::vector<const RowGroupKernels*> row_group_kernels_available();

// Per instruction set (row_groups_*.cpp); call only where the CPU has it.
#define SPLITDEC_ROW_GROUP_KERNELS(suffix)                                                   \
  void q4_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q8_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q4_group_pair_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q8_group_pair_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q4_k_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q5_k_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out); \
  void q6_k_group_dot_##suffix(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
SPLITDEC_ROW_GROUP_KERNELS(generic)
SPLITDEC_ROW_GROUP_KERNELS(avx2)
SPLITDEC_ROW_GROUP_KERNELS(avx_vnni)
SPLITDEC_ROW_GROUP_KERNELS(avx512)
SPLITDEC_ROW_GROUP_KERNELS(avx512_vnni)
#undef SPLITDEC_ROW_GROUP_KERNELS

}  // namespace splitdec::simd
