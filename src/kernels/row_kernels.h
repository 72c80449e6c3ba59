// Inside the CPU kernels: each weight format's row kernels per SIMD table,
// and linear() pinned to one table. Not for the model's code (it calls
// linear() with its backend's CpuContext), only for the kernels and their
// tests (which run every table).
#pragma once

#include <cstdint>

#include "kernels/simd/kernel_table.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

// linear() pinned to one SIMD table and without BLAS, on the process's
// pool (tests of each target).
void linear_with(const simd::KernelTable& table, const float* x, int rows, const WeightMatrix& w, float* y);

// A weight format's row kernels, taken from a SIMD table. `row` points at
// one stored row of n elements (WeightMatrix::row).
struct RowKernels {
  float (*dot)(const simd::KernelTable& t, const float* x, const uint8_t* row, int n);
  // out[r] = x[r] . row for four rows of x, the row read once.
  void (*dot4)(const simd::KernelTable& t, const float* const x[4], const uint8_t* row, int n, float out[4]);
  // The row expanded exactly to f32.
  void (*to_f32)(const simd::KernelTable& t, const uint8_t* row, int n, float* dst);
  bool f32_rows;  // stored rows are f32 already: GEMM reads them in place
  // Block formats only (else null): the row against quantized activations
  // x_q[n] with x_scale[n / 32] (Q8_0 form), or x_scale[n / 256] for the
  // K-quants (Q8_K form, simd/row_groups.h) (WeightMatrix::int8_activations).
  float (*dot_q8act)(const simd::KernelTable& t, const float* x_scale, const int8_t* x_q, const uint8_t* row, int n);
  void (*dot4_q8act)(const simd::KernelTable& t, const float* const x_scale[4], const int8_t* const x_q[4], const uint8_t* row, int n,
                     float out[4]);
  // out[j] = x . row_j for two rows against one x, each exactly dot's bits
  // (f32 / bf16 / f16 only, else null).
  void (*dot2)(const simd::KernelTable& t, const float* x, const uint8_t* row0, const uint8_t* row1, int n, float out[2]);
  // out[r] = x[r] . row0 and out[4 + r] = x[r] . row1, each exactly dot's
  // bits (f32 / bf16 / f16 only, else null).
  void (*dot4x2)(const simd::KernelTable& t, const float* const x[4], const uint8_t* row0, const uint8_t* row1, int n, float out[8]);
};
// The one dispatch point from a weight format to its kernels.
const RowKernels& row_kernels(WeightFormat format);

}  // namespace splitdec
