// What the K-quants' Q8_K-form activations (one scale per 256 values,
// simd/row_groups.h) cost in precision against the Q8_0 form (one per 32)
// they replaced: the relative RMS of Q4_K dot products (3840 values, 512
// rows of quantized Gaussian weights, 20 activation rows) against the same
// weights times the f32 activations, with and without a few outlier
// channels (large activations in a few channels, as LLM hidden states have).
//
// build: g++ -O2 -std=c++20 -Isrc -Iinclude bench/ab/ab_k_quant_activations.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_k_quant_activations
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "kernels/k_quant_rows.h"
#include "kernels/weight_matrix.h"
#include "kernels/simd/kernel_table.h"
#include "io/ggml_block_formats.h"
using namespace splitdec;
int main() {
  std::mt19937 rng(7);
  const int in = 3840, out = 512;
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> w(size_t(in) * out);
  for (float& v : w) v = normal(rng) * 0.02f;
  WeightMatrix m = WeightMatrix::from_f32(WeightFormat::Q4_K, out, in, w.data());
  for (int outliers : {0, 8}) {
    double e32 = 0, e256 = 0, ref = 0;
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(in);
      for (float& v : x) v = normal(rng);
      for (int k = 0; k < outliers; ++k) x[size_t(rng() % in)] = 40.f * (rng() % 2 ? 1 : -1);  // LLM-like outlier channels
      std::vector<float> s32(in / 32), s256(in / 256), wf(in);
      std::vector<int8_t> q32(in), q256(in);
      simd::generic_table().quantize_q8_activations(x.data(), in, 32, s32.data(), q32.data());
      simd::generic_table().quantize_q8_activations(x.data(), in, 256, s256.data(), q256.data());
      for (int o = 0; o < out; ++o) {
        m.row_f32(o, wf.data());
        double exact = 0, d32 = 0, d256 = 0;
        for (int i = 0; i < in; ++i) exact += double(wf[i]) * x[i], d32 += double(wf[i]) * s32[i / 32] * q32[i], d256 += double(wf[i]) * s256[i / 256] * q256[i];
        e32 += (d32 - exact) * (d32 - exact), e256 += (d256 - exact) * (d256 - exact), ref += exact * exact;
      }
    }
    std::printf("outlier channels %d: relative RMS vs f32 activations: Q8_0 form %.2e, Q8_K form %.2e\n", outliers, std::sqrt(e32 / ref), std::sqrt(e256 / ref));
  }
}
