// tanh-GELU (HF "gelu_pytorch_tanh") in f32 without libm, so that blocks of
// it vectorize on any ISA the file is compiled for: the decoder's MLP
// (ops::gelu_tanh_gate) and the media towers use it. The float64 oracles
// (reference_ops.cpp, reference_towers.cpp) share none of it.
#pragma once

#include <bit>
#include <cstdint>

namespace splitdec {

// e^x in f32, within ~1 ulp, branch-free so that fixed-size blocks of it
// vectorize: 2^k * e^r with k = round(x / ln 2), |r| <= ln2 / 2, and e^r by
// its degree-7 Taylor polynomial (truncation below 6e-9 relative). x is
// first clamped to [-87, 88], where 2^k stays a normal float; the clamp works
// on the bit pattern with unsigned compares (a float compare would keep GCC
// from vectorizing under the default -ftrapping-math). NaN comes out finite:
// gelu_tanh keeps it through its factor x. Always inlined: the
// per-instruction-set files (simd/gelu_gate_*.cpp) include it too, and an
// out-of-line copy built for AVX-512 must never be the one a baseline
// caller links to.
[[gnu::always_inline]] inline float exp_f32(float x) {
  constexpr uint32_t kSign = 0x80000000u, kHi = 0x42b00000u, kLo = 0xc2ae0000u;  // 88.f, -87.f
  uint32_t b = std::bit_cast<uint32_t>(x);
  uint32_t ordered = b ^ kSign;  // non-negative floats: the signed order as unsigned
  ordered = ordered > (kHi ^ kSign) ? (kHi ^ kSign) : ordered;
  b = ordered ^ kSign;
  b = b > kLo ? kLo : b;  // negative floats: larger bits are larger magnitudes
  x = std::bit_cast<float>(b);
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  const float k = (x * 1.44269504f + kRound) - kRound;
  const float r = (x - k * 0.693145751953125f) - k * 1.4286068203094172e-6f;  // ln 2 in two parts
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  return p * std::bit_cast<float>(uint32_t(int32_t(k) + 127) << 23);
}

// HF "gelu_pytorch_tanh", 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x +
// 0.044715 x^3), written as the identical x / (1 + e^(-2u)): no cancellation
// for negative x, and no libm call.
[[gnu::always_inline]] inline float gelu_tanh(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return x / (1.f + exp_f32(-2.f * u));
}

// Blocks of 16 go through a local array: the compiler then sees no aliasing
// and a fixed trip count, and vectorizes gelu_tanh without runtime checks.
constexpr int kGeluBlock = 16;

}  // namespace splitdec
