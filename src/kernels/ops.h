// The production row operators of the decoder (norms, RoPE, activation,
// residual, softcap), used by src/model/gemma_model.cpp. Their naive
// counterparts in reference_ops.h are the oracle; these keep the same
// arithmetic order, so that the plans stay token-exact against it, and are
// free to be faster where that does not change a result (RoPE computes each
// pair's cos/sin once for all heads of a row).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_context.h"

namespace splitdec::ops {

// `rows` rows of n: y = x * rsqrt(mean(x^2) + eps) * scale, with scale
// (1 + w) when `adds_one` (Gemma-3), w otherwise (Gemma-4), none when
// w == nullptr (v_norm). The sum of squares is taken in f64. y may be x.
void rms_norm(const float* x, const float* w, int rows, int n, float eps, bool adds_one, float* y);

// Rotates `heads` consecutive heads of head_dim in place (rotate_half pairs
// k and k + head_dim/2) by position * inv_freq[k]; inv_freq[k] == 0 leaves
// the pair alone.
void rope(float* x, int heads, int head_dim, const float* inv_freq, int64_t position);

// gate[i] = gelu_tanh(gate[i]) * up[i] (HF "gelu_pytorch_tanh"), in f32
// through kernels/gelu.h (within a few ulp of the float64 formula), on the
// context's pool.
void gelu_tanh_gate(float* gate, const float* up, size_t n, const CpuContext& cpu = CpuContext::process_default());

// h[i] = (h[i] + x[i]) * scale (Gemma-4's layer_scalar; 1 elsewhere, exact).
void residual_add(float* h, const float* x, size_t n, float scale = 1.f);

// x[i] = cap * tanh(x[i] / cap).
void softcap(float* x, size_t n, float cap);

}  // namespace splitdec::ops
