// Linear layers y = x W^T with W in the nn.Linear [out, in] layout, stored
// in its checkpoint format (weight_matrix.h) and expanded exactly to f32
// inside the kernel (f32 products, f32 accumulation), except where the CPU
// has AVX512_BF16 and exact_gemm() is off: then bf16 and f16 weights (and
// prefill on blocks) take bf16 products (gemm_bf16.h). The naive reference
// is ref::linear in reference_ops.h.
#pragma once

#include <cstdint>

#include "kernels/cpu_context.h"
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
// `cpu`: the threads and SIMD table to run on (a backend call's; by default
// the process's).
void linear(const float* x, int rows, const WeightMatrix& w, float* y, bool rows_independent = false,
            const CpuContext& cpu = CpuContext::process_default());

// Several small linear layers (decode-sized: the row kernels, never BLAS) in
// one dispatch of the thread pool: y_j = x_j W_j^T for each job. Each
// output's bits are the row kernels' (linear_with's,
// kernels/row_kernels.h). For many small matrices per step (a
// token's experts), where one pool dispatch per matrix would cost more than
// reading it.
struct LinearJob {
  const float* x;
  int rows;
  const WeightMatrix* w;
  float* y;
};
void linear_batch(const LinearJob* jobs, int count, const CpuContext& cpu = CpuContext::process_default());

// Rows at or above this go to the BLAS path.
constexpr int kGemmRows = 16;

}  // namespace splitdec
