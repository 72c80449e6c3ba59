#include "kernels/reference_gemm_bf16.h"

#include "core/dtype.h"

namespace splitdec::ref {

void linear_bf16_products(const float* x, int rows, int in, const uint16_t* w, int out, float* y) {
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      const float* xr = x + int64_t(r) * in;
      const uint16_t* wr = w + int64_t(o) * in;
      auto product = [&](int k) { return bf16_to_f32(f32_to_bf16(xr[k])) * bf16_to_f32(wr[k]); };
      float sum = 0;
      for (int k = 0; k < in; k += 2) {
        if (k + 1 < in) sum += product(k + 1);
        sum += product(k);
      }
      y[int64_t(r) * out + o] = sum;
    }
}

std::vector<uint16_t> bf16_weights(const WeightMatrix& w) {
  std::vector<uint16_t> out(size_t(w.out) * size_t(w.in));
  std::vector<float> row(size_t(w.in));
  for (int o = 0; o < w.out; ++o) {
    w.row_f32(o, row.data());
    for (int k = 0; k < w.in; ++k) out[size_t(o) * size_t(w.in) + size_t(k)] = f32_to_bf16(row[size_t(k)]);
  }
  return out;
}

}  // namespace splitdec::ref
