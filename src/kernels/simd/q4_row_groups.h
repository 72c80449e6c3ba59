// Q4_0 weights in row groups (WeightMatrix::group_rows) against activation
// rows in Q8_0 form: the decode kernel of 4-bit weights.
//
// Why groups: a row-at-a-time Q4_0 dot product spends most of its
// instructions unpacking nibbles and summing lanes horizontally, and ran at
// 27-48% of its weight floor. With 16 rows' blocks side by side (4 bytes of
// each row per 32-bit lane), one broadcast of 4 activation bytes meets 16
// rows at once, every lane is one output, and nothing is summed across
// lanes: the integer product (vpdpbusd where the CPU has VNNI, maddubs +
// madd where not) is the whole inner loop, as in llama.cpp's repacked Q4_0.
//
// Every kernel below gives the same bits: per output and block, the exact
// integer sum of nibble x activation, minus 8 x the block's activation sum
// (exact), as f32; times (weight scale x activation scale), added by one
// fma into that output's running sum, blocks in order. So an output does not
// depend on the instruction set, the other rows of the call, or the group's
// other rows.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/simd/kernel_table.h"

namespace splitdec::simd {

// Rows per group and the bytes of one group's block (16 x 18: the same
// bytes as the 16 rows' blocks stored one after another).
constexpr int kQ4GroupRows = 16;
constexpr int kQ4GroupBlockBytes = kQ4GroupRows * 18;

// One activation row in Q8_0 form: scale[n / 32], q[n] (-127 .. 127), and
// eight_sum[b] = 8 x the sum of block b's q (the nibbles' offset of 8).
struct Q8Row {
  const float* scale;
  const int8_t* q;
  const int32_t* eight_sum;
};

// out[r * 16 + i] = x[r] . row i of the group, for `rows` (1-4) activation
// rows; n weights per row (a multiple of 32); `group` as WeightMatrix's
// grouped layout (weight_matrix.h).
using Q4GroupDot = void (*)(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);

struct Q4GroupKernel {
  const char* name;
  Q4GroupDot dot;
};

// The kernel that goes with a SIMD table on this CPU (VNNI where present).
const Q4GroupKernel& q4_group_kernel(const KernelTable& table);
// Every kernel this CPU runs, the scalar one first (for the tests).
std::vector<const Q4GroupKernel*> q4_group_kernels_available();

// Per instruction set (q4_row_groups_*.cpp); call only where the CPU has it.
void q4_group_dot_generic(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
void q4_group_dot_avx2(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
void q4_group_dot_avx_vnni(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
void q4_group_dot_avx512(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);
void q4_group_dot_avx512_vnni(const Q8Row* x, int rows, const uint8_t* group, int n, float* out);

}  // namespace splitdec::simd
