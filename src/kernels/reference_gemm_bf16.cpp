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

}  // namespace splitdec::ref
