// The naive reference of the AVX512_BF16 GEMM (kernels/gemm_bf16.h).
#pragma once

#include <cstdint>

namespace splitdec::ref {

// y[r, o] = sum_k bf16(x[r, k]) * w[o, k] with w bf16 [out, in], x rounded
// to bf16 (nearest even), each product exact in f32 and added to one f32
// sum in the order vdpbf16ps documents: k pair by k pair, within a pair the
// odd k first.
void linear_bf16_products(const float* x, int rows, int in, const uint16_t* w, int out, float* y);

}  // namespace splitdec::ref
