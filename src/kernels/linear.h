// Linear layers y = x W^T with W in the nn.Linear [out, in] layout, stored
// in its checkpoint format (weight_matrix.h) and expanded exactly to f32
// inside the kernel (f32 products, f32 accumulation), except where the CPU
// has AVX512_BF16 and exact_gemm() is off: then bf16 and f16 weights (and
// prefill on blocks) take bf16 products (gemm_bf16.h). The naive reference
// is ref::linear in reference_ops.h.
#pragma once

#include <cstdint>

#include "kernels/simd/kernel_table.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

// Few rows (decode): SIMD dot products, four rows per weight load, two
// weight rows per call (two streams per thread), threads over output
// blocks: bandwidth-bound. Many rows (prefill): the weight is cut
// into panels (expanded to f32 per panel unless already f32) and each panel
// goes to a single-threaded BLAS sgemm on its own thread; bf16 weights
// take the AVX512_BF16 GEMM instead where the CPU has it, and in decode
// bf16 and f16 weights its matvec, unless exact_gemm() (gemm_bf16.h:
// activations rounded to bf16 there). Block rows in groups (weight_matrix.h)
// take their integer row-group kernels for any number of rows.
// `rows_independent`: never BLAS, so each row's result is the same whatever
// the other rows (dot, dot2, dot4 and dot4x2 sum a row in one order): a batched decode
// step gives every sequence the logits it gets alone.
void linear(const float* x, int rows, const WeightMatrix& w, float* y, bool rows_independent = false);
// The same, pinned to one SIMD table and without BLAS (tests of each target).
void linear_with(const simd::KernelTable& table, const float* x, int rows, const WeightMatrix& w, float* y);

// Several small linear layers (decode-sized: the row kernels, never BLAS) in
// one dispatch of the thread pool: y_j = x_j W_j^T for each job. Each
// output's bits are linear_with's. For many small matrices per step (a
// token's experts), where one pool dispatch per matrix would cost more than
// reading it.
struct LinearJob {
  const float* x;
  int rows;
  const WeightMatrix* w;
  float* y;
};
void linear_batch(const LinearJob* jobs, int count);

// Rows at or above this go to the BLAS path.
constexpr int kGemmRows = 16;

// A weight format's row kernels, taken from a SIMD table. `row` points at
// one stored row of n elements (WeightMatrix::row).
struct RowKernels {
  float (*dot)(const simd::KernelTable& t, const float* x, const uint8_t* row, int n);
  // out[r] = x[r] . row for four rows of x, the row read once.
  void (*dot4)(const simd::KernelTable& t, const float* const x[4], const uint8_t* row, int n, float out[4]);
  // The row expanded exactly to f32.
  void (*to_f32)(const simd::KernelTable& t, const uint8_t* row, int n, float* dst);
  bool f32_rows;  // stored rows are f32 already: GEMM reads them in place
  // Block formats only (else null): the row against activations quantized
  // to Q8_0 blocks, x_scale[n / 32] and x_q[n] (WeightMatrix::int8_activations).
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
