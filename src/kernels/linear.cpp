#include "kernels/linear.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "core/thread_pool.h"

extern "C" void openblas_set_num_threads(int);

namespace splitdec {

void WeightMatrix::row_f32(int o, float* dst) const {
  if (dtype == DType::F32) {
    std::memcpy(dst, f32.data() + size_t(o) * size_t(in), size_t(in) * 4);
    return;
  }
  const uint16_t* src = bf16.data() + size_t(o) * size_t(in);
  for (int i = 0; i < in; ++i) dst[i] = bf16_to_f32(src[i]);
}

namespace {

// Outputs [o0, o1) for every row, four rows per weight load.
void matvec_block(const simd::KernelTable& t, const float* x, int rows, const WeightMatrix& w, float* y, int64_t o0, int64_t o1) {
  const int in = w.in;
  for (int64_t o = o0; o < o1; ++o) {
    const float* wf = w.dtype == DType::F32 ? w.f32.data() + o * in : nullptr;
    const uint16_t* wb = w.dtype == DType::BF16 ? w.bf16.data() + o * in : nullptr;
    int r = 0;
    for (; r + 4 <= rows; r += 4) {
      const float* xs[4] = {x + int64_t(r) * in, x + int64_t(r + 1) * in, x + int64_t(r + 2) * in, x + int64_t(r + 3) * in};
      float out[4];
      if (wf) t.dot4_f32(xs, wf, in, out);
      else t.dot4_bf16(xs, wb, in, out);
      for (int k = 0; k < 4; ++k) y[int64_t(r + k) * w.out + o] = out[k];
    }
    for (; r < rows; ++r)
      y[int64_t(r) * w.out + o] = wf ? t.dot_f32(x + int64_t(r) * in, wf, in) : t.dot_bf16(x + int64_t(r) * in, wb, in);
  }
}

void gemm_panels(const float* x, int rows, const WeightMatrix& w, float* y) {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });  // our pool owns the cores
  constexpr int kPanel = 64;
  const int64_t panels = (w.out + kPanel - 1) / kPanel;
  ThreadPool::global().parallel_for(panels, [&](int64_t p0, int64_t p1) {
    std::vector<float> buf;
    for (int64_t p = p0; p < p1; ++p) {
      const int o0 = int(p * kPanel), n = std::min(kPanel, w.out - o0);
      const float* panel = w.f32.data() + int64_t(o0) * w.in;
      if (w.dtype == DType::BF16) {
        buf.resize(size_t(n) * size_t(w.in));
        for (int k = 0; k < n; ++k) w.row_f32(o0 + k, buf.data() + size_t(k) * size_t(w.in));
        panel = buf.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, w.in, 1.f, x, w.in, panel, w.in, 0.f, y + o0, w.out);
    }
  });
}

}  // namespace

void linear_with(const simd::KernelTable& t, const float* x, int rows, const WeightMatrix& w, float* y) {
  // A range worth waking a thread for: ~256K multiply-adds.
  const int64_t grain = std::max<int64_t>(16, (int64_t(1) << 18) / (int64_t(w.in) * std::max(1, rows)));
  ThreadPool::global().parallel_for(w.out, [&](int64_t o0, int64_t o1) { matvec_block(t, x, rows, w, y, o0, o1); }, grain);
}

void linear(const float* x, int rows, const WeightMatrix& w, float* y) {
  if (rows >= kGemmRows) gemm_panels(x, rows, w, y);
  else linear_with(simd::best(), x, rows, w, y);
}

}  // namespace splitdec
