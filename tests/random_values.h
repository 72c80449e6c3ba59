// Random inputs for the kernel tests.
#pragma once

#include <random>
#include <vector>

namespace splitdec::test {

// n values uniform in [-scale, scale).
inline std::vector<float> random_vec(std::mt19937& rng, size_t n, float scale = 1.f) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace splitdec::test
