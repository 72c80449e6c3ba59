// Q4_K rows one at a time (weight_matrix.h has the block layout): the rows
// of a matrix that are not in row groups (the last out % 16, or all of them
// with SPLITDEC_ROW_GROUPS=0 or f32 activations). Plain C, whatever the
// SIMD table: grouped rows take the vector kernels (simd/row_groups.h).
#pragma once

#include <cmath>
#include <cstdint>

namespace splitdec {

// The f32 step of one 32-value sub-block (simd/row_groups.h has the
// contract): `acc` plus x_scale x (d sc S - dmin m X), with S the exact sum
// of nibble x activation and X of the activations. The scalar kernels take
// it here; the vector kernels take the same operations lane by lane.
inline float q4_k_step(float acc, float x_scale, float d, float dmin, int sc, int m, int32_t sum, int32_t x_sum) {
  const float minimum = dmin * float(m) * float(x_sum);
  return std::fma(x_scale, std::fma(d * float(sc), float(sum), -minimum), acc);
}

// x . row against f32 activations: each weight expanded as llama.cpp's
// dequantize_row_q4_K does, products summed in order.
float q4_k_dot(const float* x, const uint8_t* row, int n);
// x . row against activations in Q8_0 blocks (x_scale[n / 32], x_q[n]):
// the f32 steps of the Q4_K row-group kernels (simd/row_groups.h), so a
// row gets the same bits grouped or not.
float q4_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n);
// The row expanded to f32.
void q4_k_expand(const uint8_t* row, int n, float* dst);

}  // namespace splitdec
