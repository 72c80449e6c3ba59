#include "kernels/reference_ops.h"

#include <cmath>

namespace splitdec::ref {

void rms_norm(const float* x, const float* w, int n, float eps, bool adds_one, float* y) {
  double ss = 0;
  for (int k = 0; k < n; ++k) ss += double(x[k]) * x[k];
  const float inv = float(1.0 / std::sqrt(ss / n + eps));
  for (int k = 0; k < n; ++k) {
    const float scale = w == nullptr ? 1.f : (adds_one ? 1.f + w[k] : w[k]);
    y[k] = x[k] * inv * scale;
  }
}

void rope(float* x, int head_dim, const float* inv_freq, int64_t position) {
  const int half = head_dim / 2;
  for (int k = 0; k < half; ++k) {
    // HF forms the angle in f32 (inv_freq @ position), then takes cos/sin.
    const float angle = inv_freq[k] * float(position);
    const float c = float(std::cos(double(angle))), s = float(std::sin(double(angle)));
    const float a = x[k], b = x[k + half];
    x[k] = a * c - b * s;
    x[k + half] = b * c + a * s;
  }
}

float gelu_tanh(float x) {
  const double kSqrt2OverPi = 0.7978845608028654;
  const double xd = x;
  return float(0.5 * xd * (1.0 + std::tanh(kSqrt2OverPi * (xd + 0.044715 * xd * xd * xd))));
}

void linear(const float* x, int rows, int in, const float* w, int out, float* y) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * in;
    for (int o = 0; o < out; ++o) {
      const float* wo = w + int64_t(o) * in;
      float acc = 0.f;
      for (int i = 0; i < in; ++i) acc += xr[i] * wo[i];
      y[int64_t(r) * out + o] = acc;
    }
  }
}

}  // namespace splitdec::ref
