#include "kernels/ops.h"

#include <algorithm>

#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/simd/gelu_gate.h"

namespace splitdec::ops {

void rms_norm(const float* x, const float* w, int rows, int n, float eps, bool adds_one, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * n;
    float* yr = y + int64_t(r) * n;
    double ss = 0;
    for (int k = 0; k < n; ++k) ss += double(xr[k]) * xr[k];
    const float inv = float(1.0 / std::sqrt(ss / n + eps));
    if (w == nullptr) {
      for (int k = 0; k < n; ++k) yr[k] = xr[k] * inv;
    } else if (adds_one) {
      for (int k = 0; k < n; ++k) yr[k] = xr[k] * inv * (1.f + w[k]);
    } else {
      for (int k = 0; k < n; ++k) yr[k] = xr[k] * inv * w[k];
    }
  }
}

void rope(float* x, int heads, int head_dim, const float* inv_freq, int64_t position) {
  const int half = head_dim / 2;
  // The angles depend on the position only: one cos/sin per pair for every head.
  thread_local std::vector<float> cs;
  cs.resize(size_t(2 * half));
  for (int k = 0; k < half; ++k) {
    // HF forms the angle in f32 (inv_freq @ position), then takes cos/sin.
    const float angle = inv_freq[k] * float(position);
    cs[size_t(k)] = float(std::cos(double(angle)));
    cs[size_t(half + k)] = float(std::sin(double(angle)));
  }
  for (int h = 0; h < heads; ++h) {
    float* xh = x + int64_t(h) * head_dim;
    for (int k = 0; k < half; ++k) {
      const float c = cs[size_t(k)], s = cs[size_t(half + k)];
      const float a = xh[k], b = xh[k + half];
      xh[k] = a * c - b * s;
      xh[k + half] = b * c + a * s;
    }
  }
}

void gelu_tanh_gate(float* gate, const float* up, size_t n, const CpuContext& cpu) {
  const simd::GeluGate gelu = simd::gelu_gate_kernel(*cpu.table);
  // Ranges of >= 32K values over the pool (a prefill chunk's MLP is
  // millions); each value is computed the same way wherever it falls, so
  // results do not depend on the thread count or on the batch a row is in.
  cpu.pool->parallel_for(
      int64_t(n),
      [&](int64_t b, int64_t e) {
        gelu(gate + b, up + b, e - b);
      },
      int64_t(1) << 15);
}

void residual_add(float* h, const float* x, size_t n, float scale) {
  for (size_t i = 0; i < n; ++i) h[i] = (h[i] + x[i]) * scale;
}

void softcap(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace splitdec::ops
