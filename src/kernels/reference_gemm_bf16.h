// The naive reference of the AVX512_BF16 GEMM (kernels/gemm_bf16.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weight_matrix.h"

namespace splitdec::ref {

// y[r, o] = sum_k bf16(x[r, k]) * w[o, k] with w bf16 [out, in], x rounded
// to bf16 (nearest even), each product exact in f32 and added to one f32
// sum in the order vdpbf16ps documents: k pair by k pair, within a pair the
// odd k first.
void linear_bf16_products(const float* x, int rows, int in, const uint16_t* w, int out, float* y);

// The bf16 weights gemm_bf16 multiplies for `w` stored in any format: each
// value expanded exactly (row_f32: f16 widened, d * q for blocks) and
// rounded to bf16, nearest even. [out, in].
std::vector<uint16_t> bf16_weights(const WeightMatrix& w);

}  // namespace splitdec::ref
