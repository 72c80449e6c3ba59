// Random tensors for the tower tests (test_media_towers, test_audio_conformer):
// one seeded stream of normals, uniforms, norm gains and weight matrices.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/weight_matrix.h"

namespace splitdec::test {

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  float normal(float sd, float mean = 0.f) { return std::normal_distribution<float>(mean, sd)(gen_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  std::vector<float> normals(size_t n, float sd, float mean = 0.f) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(sd, mean);
    return v;
  }
  std::vector<float> uniforms(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  // Norm weights around 1.
  std::vector<float> gains(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = 1.f + normal(0.1f);
    return v;
  }
  // [out, in], N(0, 1 / in): activations keep their scale through the layer.
  WeightMatrix matrix(WeightFormat f, int out, int in) {
    const std::vector<float> v = normals(size_t(out) * size_t(in), float(1.0 / std::sqrt(double(in))));
    return WeightMatrix::from_f32(f, out, in, v.data());
  }

 private:
  std::mt19937 gen_;
};

}  // namespace splitdec::test
