// Linear layers y = x W^T with W in the nn.Linear [out, in] layout, f32 or
// bf16 (real checkpoints are bf16; the weights stay bf16 in memory and are
// expanded exactly to f32 inside the kernel). The naive reference is
// ref::linear in reference_ops.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/simd/kernel_table.h"

namespace splitdec {

struct WeightMatrix {
  int out = 0, in = 0;
  DType dtype = DType::F32;       // F32 or BF16
  std::vector<float> f32;         // [out, in] when F32
  std::vector<uint16_t> bf16;     // [out, in] when BF16
  size_t bytes() const { return f32.size() * 4 + bf16.size() * 2; }
  void row_f32(int o, float* dst) const;
};

// Few rows (decode): SIMD dot products, four rows per weight load, threads
// over output blocks: bandwidth-bound. Many rows (prefill): the weight is cut
// into panels (bf16 expanded to f32 per panel) and each panel goes to a
// single-threaded BLAS sgemm on its own thread.
void linear(const float* x, int rows, const WeightMatrix& w, float* y);
// The same, pinned to one SIMD table and without BLAS (tests of each target).
void linear_with(const simd::KernelTable& table, const float* x, int rows, const WeightMatrix& w, float* y);

// Rows at or above this go to the BLAS path.
constexpr int kGemmRows = 16;

}  // namespace splitdec
