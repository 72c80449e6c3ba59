// A/B of the bf16 prefill GEMM (kernels/gemm_bf16.h) against the exact path
// (bf16 widened to f32 for OpenBLAS) on gemma3-1b's linear shapes: one
// linear() call per shape, the two paths alternated 9 times through
// set_exact_gemm, medians and their ratio. Whole-model numbers are in
// `splitdec bench --only bf16_gemm`; this isolates the GEMM.
//
// build: g++ -O2 -std=c++20 -Isrc -Iinclude bench/ab/ab_gemm_bf16.cpp build/libsplitdec_core.a -lopenblas -lpthread -o /tmp/ab_gemm_bf16
// usage: ab_gemm_bf16 [rows (default 512)]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/gemm_bf16.h"
#include "kernels/linear.h"

using namespace splitdec;

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 512;
  if (!bf16_gemm_supported()) {
    std::printf("no AVX512_BF16 (or SPLITDEC_SIMD chose another table): nothing to compare\n");
    return 0;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  struct Shape {
    const char* name;
    int out, in;
  };
  for (const Shape s : {Shape{"q_proj", 1024, 1152}, {"k_proj", 256, 1152}, {"o_proj", 1152, 1024}, {"gate_proj", 6912, 1152},
                        {"down_proj", 1152, 6912}}) {
    std::vector<float> wf(size_t(s.out) * size_t(s.in)), x(size_t(rows) * size_t(s.in)), y(size_t(rows) * size_t(s.out));
    for (float& v : wf) v = uniform(rng);
    for (float& v : x) v = uniform(rng);
    const WeightMatrix w = WeightMatrix::from_f32(WeightFormat::BF16, s.out, s.in, wf.data());
    std::vector<double> seconds[2];  // [0] exact, [1] bf16 products
    for (int i = 0; i < 18; ++i) {
      const int fast = i % 2;
      set_exact_gemm(!fast);
      const double t0 = now_s();
      linear(x.data(), rows, w, y.data());
      seconds[fast].push_back(now_s() - t0);
    }
    const double flop = 2.0 * rows * s.out * double(s.in), exact = median(seconds[0]), fast = median(seconds[1]);
    std::printf("%-9s %5d x %-5d rows %4d: exact %6.1f GFLOP/s, bf16 products %6.1f GFLOP/s, %.2fx\n", s.name, s.out, s.in, rows,
                flop / exact / 1e9, flop / fast / 1e9, exact / fast);
  }
}
