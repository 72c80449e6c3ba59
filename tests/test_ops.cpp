// The production row operators (kernels/ops.h) against their naive oracle
// counterparts (kernels/reference_ops.h), on random inputs including edge
// sizes. They keep the oracle's arithmetic order, so the results must be
// bit-identical: the plans are checked token-exact against the oracle.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/ops.h"
#include "kernels/reference_ops.h"
#include "kernels/simd/gelu_gate.h"
#include "kernels/simd/kernel_table.h"
#include "random_values.h"

using namespace splitdec;
using test::random_vec;

TEST(Ops, RmsNormMatchesReferenceOnEveryRow) {
  std::mt19937 rng(1);
  for (int n : {1, 2, 3, 7, 16, 33, 257})
    for (int rows : {1, 3})
      for (int flavour = 0; flavour < 3; ++flavour) {  // (1 + w), w, no weight
        const auto x = random_vec(rng, size_t(rows) * size_t(n), 3.f), w = random_vec(rng, size_t(n));
        const float* wp = flavour == 2 ? nullptr : w.data();
        const bool add1 = flavour == 0;
        std::vector<float> want(x.size()), got(x.size());
        for (int r = 0; r < rows; ++r)
          ref::rms_norm(x.data() + size_t(r) * size_t(n), wp, n, 1e-6f, add1, want.data() + size_t(r) * size_t(n));
        ops::rms_norm(x.data(), wp, rows, n, 1e-6f, add1, got.data());
        EXPECT_EQ(got, want) << "n " << n << " rows " << rows << " flavour " << flavour;
        auto in_place = x;  // the model normalises q/k/v heads in place
        ops::rms_norm(in_place.data(), wp, rows, n, 1e-6f, add1, in_place.data());
        EXPECT_EQ(in_place, want) << "in place, n " << n;
      }
}

TEST(Ops, RopeMatchesReferenceForEveryHead) {
  std::mt19937 rng(2);
  for (int hd : {2, 4, 6, 16, 34})
    for (int heads : {1, 3})
      for (int64_t pos : {int64_t(0), int64_t(1), int64_t(17), int64_t(100000)}) {
        // Some pairs not rotated (proportional RoPE's zeros).
        std::vector<float> inv(size_t(hd / 2));
        for (size_t k = 0; k < inv.size(); ++k) inv[k] = k % 3 == 2 ? 0.f : float(1.0 / std::pow(1e4, 2.0 * double(k) / hd));
        const auto x = random_vec(rng, size_t(heads) * size_t(hd));
        auto want = x, got = x;
        for (int h = 0; h < heads; ++h) ref::rope(want.data() + size_t(h) * size_t(hd), hd, inv.data(), pos);
        ops::rope(got.data(), heads, hd, inv.data(), pos);
        EXPECT_EQ(got, want) << "head_dim " << hd << " heads " << heads << " position " << pos;
      }
}

// The f32 GELU (kernels/gelu.h) against the float64 formula: within a few
// ulp of the value times the conditioning of e^(2u) (u is formed in f32, as
// torch forms it, so its rounding grows with |2u|), plus 1e-30 absolute for
// the far negative tail where both are ~0; over the range a real MLP sees,
// the extremes and the edge lengths of its 16-value blocks; and the same bits
// however the work is cut.
TEST(Ops, GeluGateMatchesReference) {
  std::mt19937 rng(3);
  for (size_t n : {size_t(1), size_t(5), size_t(15), size_t(16), size_t(17), size_t(64), size_t(131), size_t(70001)}) {
    auto gate = random_vec(rng, n, 6.f);
    const auto up = random_vec(rng, n, 2.f);
    if (n > 8) gate[0] = 0.f, gate[1] = -30.f, gate[2] = 30.f, gate[3] = -1e-20f, gate[4] = 88.5f, gate[5] = -100.f;
    auto got = gate;
    ops::gelu_tanh_gate(got.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double want = double(ref::gelu_tanh(gate[i])) * up[i];
      const double x = gate[i], two_u = std::abs(2 * 0.7978845608 * (x + 0.044715 * x * x * x));
      ASSERT_NEAR(got[i], want, 2.5e-7 * (1 + two_u) * std::abs(want) + 1e-30) << "gate " << x << " at " << i << " of " << n;
    }
    // One value at a time: the same bits as the whole call.
    for (size_t i = 0; i < n; i += 1 + n / 97) {
      float one = gate[i];
      ops::gelu_tanh_gate(&one, &up[i], 1);
      ASSERT_EQ(one, got[i]) << i;
    }
  }
}

// Each table's gate (8 or 16 lanes, contraction off) against the baseline
// build's, bit for bit: every length up to two blocks and a long one, the
// extremes, infinities and NaN.
TEST(Ops, GeluGateGivesTheSameBitsOnEveryTable) {
  std::mt19937 rng(5);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(70001);
  for (size_t n : lengths) {
    auto gate = random_vec(rng, n, 8.f);
    const auto up = random_vec(rng, n, 2.f);
    const float edges[] = {0.f, -0.f, -30.f, 30.f, -1e-20f, 1e-38f, 88.5f, -100.f, inf, -inf, nan, 3e38f, -3e38f};
    for (size_t i = 0; i < n && i < std::size(edges); ++i) gate[(i * 7) % n] = edges[i];
    auto want = gate;
    simd::gelu_gate_generic(want.data(), up.data(), int64_t(n));
    for (const simd::KernelTable* table : simd::available()) {
      auto got = gate;
      simd::gelu_gate_kernel(*table)(got.data(), up.data(), int64_t(n));
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << table->name << ": gate " << gate[i] << " up " << up[i] << " at " << i << " of " << n;
    }
  }
}

TEST(Ops, ResidualAndSoftcap) {
  std::mt19937 rng(4);
  for (size_t n : {size_t(1), size_t(9), size_t(100)}) {
    const auto h = random_vec(rng, n, 4.f), x = random_vec(rng, n, 4.f);
    auto plain = h, scaled = h;
    ops::residual_add(plain.data(), x.data(), n);
    ops::residual_add(scaled.data(), x.data(), n, 0.75f);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(plain[i], h[i] + x[i]);
      EXPECT_EQ(scaled[i], (h[i] + x[i]) * 0.75f);
    }
    auto capped = h;
    ops::softcap(capped.data(), n, 3.f);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(capped[i], 3.f * std::tanh(h[i] / 3.f));
      EXPECT_LT(std::fabs(capped[i]), 3.f);
    }
  }
}
