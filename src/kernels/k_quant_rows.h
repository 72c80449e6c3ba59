// Q4_K, Q5_K and Q6_K rows one at a time (weight_matrix.h has the block layouts):
// the rows of a matrix that are not in row groups (the last out % 16, or
// all of them with SPLITDEC_ROW_GROUPS=0 or f32 activations). Plain C,
// whatever the SIMD table: grouped rows take the vector kernels
// (simd/row_groups.h), and both take the f32 steps written here, so a row
// gets the same bits grouped or not.
#pragma once

#include <cmath>
#include <cstdint>

namespace splitdec {

// Q4_K's and Q5_K's f32 step of one super-block (simd/row_groups.h has the
// contract): `acc` plus x_scale x (d S - dmin M), with S the exact sum of
// sc_j x (weight value x activation) and M of m_j x activation.
inline float q4_k_step(float acc, float x_scale, float d, float dmin, int32_t scaled_sum, int32_t min_sum) {
  return std::fma(x_scale, std::fma(d, float(scaled_sum), -(dmin * float(min_sum))), acc);
}

// Q6_K's f32 step of one super-block: `acc` plus d x_scale T, T the exact
// integer of simd/row_groups.h.
inline float q6_k_step(float acc, float x_scale, float d, int32_t t) { return std::fma(d * x_scale, float(t), acc); }

// x . row against f32 activations: each weight expanded as llama.cpp's
// dequantize_row_q4_K / _q5_K / _q6_K does, products summed in order.
float q4_k_dot(const float* x, const uint8_t* row, int n);
float q5_k_dot(const float* x, const uint8_t* row, int n);
float q6_k_dot(const float* x, const uint8_t* row, int n);
// x . row against activations in Q8_K form (x_scale[n / 256], x_q[n]):
// the f32 steps of the row-group kernels.
float q4_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n);
float q5_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n);
float q6_k_dot_q8(const float* x_scale, const int8_t* x_q, const uint8_t* row, int n);
// The row expanded to f32.
void q4_k_expand(const uint8_t* row, int n, float* dst);
void q5_k_expand(const uint8_t* row, int n, float* dst);
void q6_k_expand(const uint8_t* row, int n, float* dst);

}  // namespace splitdec
