// Prefill GEMM with AVX512_BF16 (vdpbf16ps) on bf16, f16, Q8_0 and Q4_0
// weights: y[rows][out] = x[rows][in] * W[out][in]^T with every x rounded
// to bf16 (nearest even) and every product of two bf16 values exact in f32,
// summed in f32. This is the precision llama.cpp's bf16 prefill has (issue
// 30's precision decision); f32 weights and the reference plan never take
// it. Weights stored otherwise are rounded to bf16 on the way in (f16
// values; Q8_0 / Q4_0's d * q, exact in f32): one more rounding of 2^-9 at
// most, beside the 2^-5..2^-8 the blocks' own quantization step already is.
// The naive reference is ref::linear_bf16_products (reference_gemm_bf16.h);
// docs/kernels.md has the layout and the measured deviation.
#pragma once

#include "kernels/cpu_context.h"
#include "kernels/weight_matrix.h"

namespace splitdec {

// The exact switch: true keeps every GEMM in f32 products (bf16 weights
// expanded to f32 for BLAS). Starts as SPLITDEC_EXACT_GEMM=1 in the
// environment says; tests that compare with f32 oracles at tight
// tolerances and the bench's A/B set it.
bool exact_gemm();
void set_exact_gemm(bool exact);

// Whether the CPU has AVX512_BF16 and the chosen SIMD table is AVX-512
// (SPLITDEC_SIMD=avx2 or generic turns the kernel off).
bool bf16_gemm_supported();
// Keeps linear() on this thread exact while it lives, whatever the switch
// says: the reference plan (reference_logits) is exact by definition.
class ExactGemmOnThisThread {
 public:
  ExactGemmOnThisThread();
  ~ExactGemmOnThisThread();
  ExactGemmOnThisThread(const ExactGemmOnThisThread&) = delete;
  ExactGemmOnThisThread& operator=(const ExactGemmOnThisThread&) = delete;
};

// Whether linear() sends prefill GEMMs here: supported, not exact_gemm()
// and no ExactGemmOnThisThread alive on the calling thread.
bool bf16_gemm_enabled();
// Whether gemm_bf16 takes weights stored as `f` (all but F32).
bool bf16_gemm_takes(WeightFormat f);

// bf16_gemm_takes(w.format) and bf16_gemm_supported(). Output panels are spread over
// the context's pool; each result is one f32 sum in a fixed order (k pairs in
// order, see the reference), so it depends on neither the thread count nor
// the other rows.
void gemm_bf16(const float* x, int rows, const WeightMatrix& w, float* y, const CpuContext& cpu = CpuContext::process_default());

// Decode rows (any count) on bf16 or f16 weights (f16 rounded to bf16 as
// loaded, as the GEMM packs them) with the same bf16 products, for
// linear() below kGemmRows rows or with rows_independent: each (row,
// output) is summed in one order whatever the other rows and the thread
// count (a sequence's logits are the same alone or batched), but not the
// GEMM's order. w must be matvec_bf16_takes() and bf16_gemm_supported().
// Block formats keep their int8 decode kernels (fewer bytes to stream).
bool matvec_bf16_takes(WeightFormat f);
void matvec_bf16(const float* x, int rows, const WeightMatrix& w, float* y, const CpuContext& cpu = CpuContext::process_default());

}  // namespace splitdec
