// RMSNorm (both variants), RoPE (full and partial) and GeGLU against values
// computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/reference_ops.h"

using namespace splitdec;

TEST(ReferenceOps, RmsNormGemma3AddsOne) {
  // x = [1, 2, 3, 4]: mean(x^2) = 7.5, rsqrt(7.5 + 0) = 0.365148...
  const float x[4] = {1, 2, 3, 4}, w[4] = {0, 1, -1, 0.5f};
  float y[4];
  ref::rms_norm(x, w, 4, 0.f, /*adds_one=*/true, y);
  const float r = 1.f / std::sqrt(7.5f);
  EXPECT_NEAR(y[0], 1 * r * 1.0f, 1e-6);
  EXPECT_NEAR(y[1], 2 * r * 2.0f, 1e-6);
  EXPECT_NEAR(y[2], 0.f, 1e-6);
  EXPECT_NEAR(y[3], 4 * r * 1.5f, 1e-6);
}

TEST(ReferenceOps, RmsNormGemma4MultipliesAndEps) {
  const float x[2] = {3, 4}, w[2] = {2, 0.5f};
  float y[2];
  // mean(x^2) = 12.5, + eps 0.5 = 13 -> rsqrt = 0.27735
  ref::rms_norm(x, w, 2, 0.5f, /*adds_one=*/false, y);
  EXPECT_NEAR(y[0], 3 * 2 / std::sqrt(13.f), 1e-6);
  EXPECT_NEAR(y[1], 4 * 0.5f / std::sqrt(13.f), 1e-6);
  // No weight (v_norm): plain normalisation.
  ref::rms_norm(x, nullptr, 2, 0.f, false, y);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5f), 1e-6);
}

TEST(ReferenceOps, RopeFullRotatesHalfPairs) {
  // head_dim 4: pairs (x0, x2) and (x1, x3). inv_freq = [1, 0.01], position 2.
  float x[4] = {1, 2, 3, 4};
  const float inv[2] = {1.f, 0.01f};
  ref::rope(x, 4, inv, 2);
  const double a0 = 2.0, a1 = 0.02;
  EXPECT_NEAR(x[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-6);
  EXPECT_NEAR(x[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-6);
  EXPECT_NEAR(x[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-6);
}

TEST(ReferenceOps, RopePartialLeavesZeroFrequencyPairs) {
  // Proportional RoPE with 1 of 3 pairs rotated: pairs 1 and 2 stay put.
  float x[6] = {1, 2, 3, 4, 5, 6};
  const float inv[3] = {0.5f, 0.f, 0.f};
  ref::rope(x, 6, inv, 3);
  EXPECT_NEAR(x[0], 1 * std::cos(1.5) - 4 * std::sin(1.5), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(1.5) + 1 * std::sin(1.5), 1e-6);
  EXPECT_EQ(x[1], 2);
  EXPECT_EQ(x[2], 3);
  EXPECT_EQ(x[4], 5);
  EXPECT_EQ(x[5], 6);
  // Position 0 is the identity.
  float y[6] = {1, 2, 3, 4, 5, 6};
  const float full[3] = {1, 1, 1};
  ref::rope(y, 6, full, 0);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(y[k], float(k + 1));
}

TEST(ReferenceOps, GeluTanhAndGeglu) {
  EXPECT_EQ(ref::gelu_tanh(0.f), 0.f);
  EXPECT_NEAR(ref::gelu_tanh(1.f), 0.8411920f, 1e-6);
  EXPECT_NEAR(ref::gelu_tanh(-1.f), -0.1588080f, 1e-6);
  EXPECT_NEAR(ref::gelu_tanh(3.f), 2.9963627f, 1e-6);
  // GeGLU: gelu(gate) * up, gate = W_g x, up = W_u x.
  const float x[2] = {1, -1};
  const float wg[2] = {2, 1};   // gate = 1
  const float wu[2] = {1, -2};  // up = 3
  float g, u;
  ref::linear(x, 1, 2, wg, 1, &g);
  ref::linear(x, 1, 2, wu, 1, &u);
  EXPECT_NEAR(ref::gelu_tanh(g) * u, 3 * 0.8411920f, 1e-5);
}

TEST(ReferenceOps, LinearUsesOutInLayout) {
  const float x[2 * 3] = {1, 2, 3, 4, 5, 6};
  const float w[2 * 3] = {1, 0, 0, 0, 1, 1};  // out 0 = x0, out 1 = x1 + x2
  float y[4];
  ref::linear(x, 2, 3, w, 2, y);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], 5);
  EXPECT_EQ(y[2], 4);
  EXPECT_EQ(y[3], 11);
}
