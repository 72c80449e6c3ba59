// Naive reference operators: fp32, plain loops, no SIMD. They define the
// math that every fast kernel is tested against.
#pragma once

#include <cstdint>
#include <vector>

namespace splitdec::ref {

// y = x * rsqrt(mean(x^2) + eps) * scale, with scale = (1 + w) when
// `adds_one` (Gemma-3) or w (Gemma-4); w == nullptr means no scale (v_norm).
void rms_norm(const float* x, const float* w, int n, float eps, bool adds_one, float* y);

// Rotates one head in place (rotate_half form: pair k is (x[k], x[k + d/2]))
// by angle position * inv_freq[k]. inv_freq[k] == 0 leaves the pair alone.
void rope(float* x, int head_dim, const float* inv_freq, int64_t position);

// GELU, tanh approximation (HF "gelu_pytorch_tanh").
float gelu_tanh(float x);

// y[r, o] = sum_i x[r, i] * w[o, i]   (w in the nn.Linear [out, in] layout)
void linear(const float* x, int rows, int in, const float* w, int out, float* y);

}  // namespace splitdec::ref
